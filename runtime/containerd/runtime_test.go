package containerd_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/defaults"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/containerlogs"
	"github.com/nodelet/nodelet/hosttools"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/containerd"
	"github.com/nodelet/nodelet/runtime/runtimetest"
	"github.com/nodelet/nodelet/test/images"
	"github.com/nodelet/nodelet/test/testkit"
)

// fixture is a private containerd with the pause and busybox images and a
// network namespace for the pod.
type fixture struct {
	addr    string
	rt      *containerd.Runtime
	cfg     containerd.Config
	netns   string
	logRoot string
	pause   runtime.Image
	busybox runtime.Image
}

// newFixture starts the fixture; with nodeLogger the containers' output
// goes through a container logger (containerlogs) run by the test, as on a
// node, else the runtime copies it itself.
func newFixture(t *testing.T, nodeLogger bool) *fixture {
	t.Helper()
	ctx := context.Background()
	f := &fixture{addr: runtimetest.StartContainerd(t), logRoot: filepath.Join(t.TempDir(), "pods")}
	dir := t.TempDir()
	f.cfg = containerd.Config{Address: f.addr, LogRoot: f.logRoot, StateDir: filepath.Join(dir, "state"), RuncRoot: filepath.Join(dir, "runc")}
	if nodeLogger {
		f.cfg.Logs = startContainerLogger(t, filepath.Join(dir, "logger"))
	}
	f.rt = newRuntime(t, f.cfg)
	runtimetest.ImportTestImages(t, f.rt, dir, false)
	var err error
	if f.pause, err = f.rt.EnsureImage(ctx, images.PauseRef, corev1.PullNever); err != nil {
		t.Fatal(err)
	}
	if f.busybox, err = f.rt.EnsureImage(ctx, "busybox:1.36", corev1.PullIfNotPresent); err != nil {
		t.Fatal(err)
	}
	f.netns = addNetNS(t)
	return f
}

func newRuntime(t *testing.T, cfg containerd.Config) *containerd.Runtime {
	t.Helper()
	rt, err := containerd.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

// addNetNS creates a named network namespace, removed at cleanup.
func addNetNS(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	rand.Read(b)
	name := "nodelet-rt-" + hex.EncodeToString(b)
	if out, err := hosttools.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := hosttools.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	return "/var/run/netns/" + name
}

func testPod(name string, containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{Containers: containers},
	}
}

// runContainer creates and starts one of the pod's containers.
func (f *fixture) runContainer(t *testing.T, pod *corev1.Pod, sandbox string, i int) string {
	t.Helper()
	ctx := context.Background()
	c := &pod.Spec.Containers[i]
	id, err := f.rt.CreateContainer(ctx, pod, c, runtime.ContainerConfig{
		SandboxID: sandbox, Image: f.busybox, ImageName: c.Image,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	return id
}

// podStatus reads the pod through both PodStatus and PodStatuses and
// fails when they disagree.
func podStatus(t *testing.T, rt *containerd.Runtime, uid string) *runtime.PodStatus {
	t.Helper()
	one, err := rt.PodStatus(context.Background(), types.UID(uid))
	if err != nil {
		t.Fatal(err)
	}
	all, err := rt.PodStatuses(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for i := range all {
		if string(all[i].UID) == uid {
			if a, b := statusSummary(one), statusSummary(&all[i]); a != b {
				t.Fatalf("PodStatus and PodStatuses disagree:\n%s\n%s", a, b)
			}
			return &all[i]
		}
	}
	if len(one.Sandboxes)+len(one.Containers) > 0 {
		t.Fatalf("PodStatus found %s, PodStatuses did not", statusSummary(one))
	}
	return nil
}

func statusSummary(p *runtime.PodStatus) string {
	out := ""
	for _, sb := range p.Sandboxes {
		out += fmt.Sprintf("sandbox %s %s %s; ", sb.ID, sb.State, sb.IP)
	}
	for _, c := range p.Containers {
		out += fmt.Sprintf("container %s %s %s exit %d %s; ", c.Name, c.ID, c.State, c.ExitCode, c.Reason)
	}
	return out
}

// waitLog waits up to 10 s for the log at path to contain every one of
// want, and returns the log.
func waitLog(t *testing.T, path string, want ...string) string {
	t.Helper()
	var log string
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("log %s to contain %q", path, want), func() (bool, error) {
		data, _ := os.ReadFile(path)
		log = string(data)
		for _, w := range want {
			if !strings.Contains(log, w) {
				return false, fmt.Errorf("log lacks %q:\n%s", w, log)
			}
		}
		return true, nil
	})
	return log
}

func TestContainerdPodLifecycle(t *testing.T) {
	f := newFixture(t, true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pod := testPod("web",
		corev1.Container{Name: "echo", Image: "busybox:1.36", Command: []string{"sh", "-c", "echo hello; echo oops >&2; exit 3"}},
		corev1.Container{Name: "sleeper", Image: "busybox:1.36", Command: []string{"sleep", "1000"}},
	)
	sb, err := f.rt.RunSandbox(ctx, pod, runtime.SandboxConfig{Image: f.pause, NetNSPath: f.netns})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.rt.SetSandboxIP(ctx, sb, "10.99.0.2"); err != nil {
		t.Fatal(err)
	}
	events := f.rt.Events(ctx)

	echo := f.runContainer(t, pod, sb, 0)
	waitExit(t, events, echo)
	st := podStatus(t, f.rt, "uid-web")
	if st == nil || st.LatestSandbox() == nil || st.LatestSandbox().State != runtime.StateRunning {
		t.Fatalf("sandbox not running: %+v", st)
	}
	if s := st.LatestSandbox(); s.ID != sb || s.IP != "10.99.0.2" || s.NetNSPath != f.netns {
		t.Errorf("sandbox status = %+v", s)
	}
	ec := st.LatestContainer("echo")
	if ec == nil || ec.State != runtime.StateExited || ec.ExitCode != 3 || ec.Reason != "Error" || ec.FinishedAt.IsZero() || ec.StartedAt.IsZero() {
		t.Fatalf("echo status = %+v", ec)
	}
	wantLog := filepath.Join(f.logRoot, "default_web_uid-web", "echo", "0.log")
	if ec.LogPath != wantLog || ec.ImageRef == "" || ec.Image != "busybox:1.36" {
		t.Errorf("echo status = %+v", ec)
	}
	log := waitLog(t, wantLog, " stdout F hello\n", " stderr F oops\n")
	checkCRILines(t, log)

	sleeper := f.runContainer(t, pod, sb, 1)
	if c := podStatus(t, f.rt, "uid-web").LatestContainer("sleeper"); c == nil || c.State != runtime.StateRunning {
		t.Fatalf("sleeper status = %+v", c)
	}
	start := time.Now()
	if err := f.rt.StopContainer(ctx, sleeper, time.Second); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < time.Second || d > 8*time.Second {
		t.Errorf("stop with grace 1s took %v", d)
	}
	before := podStatus(t, f.rt, "uid-web")
	if c := before.LatestContainer("sleeper"); c == nil || c.State != runtime.StateExited || c.ExitCode != 137 {
		var out []byte
		if c != nil {
			out, _ = os.ReadFile(c.LogPath)
		}
		t.Fatalf("sleeper after stop = %+v\nits log:\n%s", c, out)
	}

	// A restarted nodelet finds the same pod in the same states.
	after := podStatus(t, newRuntime(t, f.cfg), "uid-web")
	if !sameStatus(before, after) {
		t.Errorf("after restart:\n%+v\nbefore:\n%+v", after, before)
	}

	for i := 0; i < 2; i++ {
		if err := f.rt.StopSandbox(ctx, sb); err != nil {
			t.Fatalf("stop sandbox (%d): %v", i, err)
		}
	}
	if s := podStatus(t, f.rt, "uid-web").LatestSandbox(); s == nil || s.State != runtime.StateExited {
		t.Errorf("sandbox after stop = %+v", s)
	}
	for i := 0; i < 2; i++ {
		if err := f.rt.RemoveSandbox(ctx, sb); err != nil {
			t.Fatalf("remove sandbox (%d): %v", i, err)
		}
	}
	if st := podStatus(t, f.rt, "uid-web"); st != nil {
		t.Errorf("pod still listed after removal: %+v", st)
	}
	assertNothingLeft(t, f.rt)
}

func waitExit(t *testing.T, events <-chan runtime.TaskExit, id string) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatal("event stream closed")
			}
			if e.ContainerID == id {
				if e.ExitedAt.IsZero() {
					t.Errorf("exit event without time: %+v", e)
				}
				return
			}
		case <-timeout:
			t.Fatalf("no exit event for %s within 20s", id)
		}
	}
}

// checkCRILines checks that each line is "<RFC3339Nano> <stream> <F|P> ...".
func checkCRILines(t *testing.T, log string) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSuffix(log, "\n"), "\n") {
		f := strings.SplitN(line, " ", 4)
		if len(f) != 4 || (f[1] != "stdout" && f[1] != "stderr") || (f[2] != "F" && f[2] != "P") {
			t.Errorf("not a CRI log line: %q", line)
			continue
		}
		if _, err := time.Parse(time.RFC3339Nano, f[0]); err != nil {
			t.Errorf("bad timestamp in %q: %v", line, err)
		}
	}
}

func sameStatus(a, b *runtime.PodStatus) bool {
	if a == nil || b == nil || len(a.Sandboxes) != len(b.Sandboxes) || len(a.Containers) != len(b.Containers) {
		return false
	}
	for i := range a.Sandboxes {
		x, y := a.Sandboxes[i], b.Sandboxes[i]
		if x.ID != y.ID || x.State != y.State || !x.CreatedAt.Equal(y.CreatedAt) {
			return false
		}
	}
	for i := range a.Containers {
		x, y := a.Containers[i], b.Containers[i]
		if x.ID != y.ID || x.State != y.State || x.ExitCode != y.ExitCode || !x.FinishedAt.Equal(y.FinishedAt) || !x.StartedAt.Equal(y.StartedAt) {
			return false
		}
	}
	return true
}

// assertNothingLeft checks that no container, task or container snapshot
// remains in the runtime's namespace (image snapshots stay).
func assertNothingLeft(t *testing.T, rt *containerd.Runtime) {
	t.Helper()
	ctx := rt.NamespaceForTest(context.Background())
	cs, err := rt.ClientForTest().Containers(ctx)
	if err != nil || len(cs) != 0 {
		t.Errorf("containers left: %d (%v)", len(cs), err)
	}
	var active []string
	err = rt.ClientForTest().SnapshotService(defaults.DefaultSnapshotter).Walk(ctx, func(_ context.Context, info snapshots.Info) error {
		if info.Kind == snapshots.KindActive {
			active = append(active, info.Name)
		}
		return nil
	})
	if err != nil || len(active) != 0 {
		t.Errorf("active snapshots left: %v (%v)", active, err)
	}
}

func TestEnsureImagePolicies(t *testing.T) {
	f := newFixture(t, false)
	ctx := context.Background()
	img, err := f.rt.EnsureImage(ctx, "busybox:1.36", corev1.PullNever)
	if err != nil {
		t.Fatal(err)
	}
	if img.Ref != images.BusyboxRef || !strings.HasPrefix(img.ID, "sha256:") ||
		!strings.HasPrefix(img.RepoDigest, "docker.io/library/busybox@sha256:") || img.Config.Cmd[0] != "sh" {
		t.Errorf("image = %+v", img)
	}
	if _, err := f.rt.EnsureImage(ctx, "busybox:missing", corev1.PullNever); !errors.Is(err, runtime.ErrImageNeverPull) {
		t.Errorf("Never on a missing image: %v", err)
	}
	// A registry on a closed loopback port: the pull fails without traffic
	// leaving the machine.
	if _, err := f.rt.EnsureImage(ctx, "127.0.0.1:1/none:1", corev1.PullIfNotPresent); !errors.Is(err, runtime.ErrImagePull) {
		t.Errorf("pull from a closed port: %v", err)
	}
	if _, err := f.rt.EnsureImage(ctx, "Bad//Name", corev1.PullIfNotPresent); !errors.Is(err, runtime.ErrInvalidImageName) {
		t.Errorf("invalid name: %v", err)
	}
}

// TestPipeLogs runs a container whose output the runtime copies itself
// (no log driver).
func TestPipeLogs(t *testing.T) {
	f := newFixture(t, false)
	ctx := context.Background()
	pod := testPod("pipes", corev1.Container{Name: "c", Image: "busybox:1.36", Command: []string{"sh", "-c", "echo one; printf two"}})
	sb, err := f.rt.RunSandbox(ctx, pod, runtime.SandboxConfig{Image: f.pause, NetNSPath: f.netns, Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	id := f.runContainer(t, pod, sb, 0)
	path := filepath.Join(f.logRoot, "default_pipes_uid-pipes", "c", "0.log")
	waitLog(t, path, " stdout F one\n")
	if err := f.rt.StopContainer(ctx, id, time.Second); err != nil {
		t.Fatal(err)
	}
	// The unterminated last line is flushed once the task is gone, as a
	// partial entry (containerd's CRI plugin writes it so).
	checkCRILines(t, waitLog(t, path, " stdout F one\n", " stdout P two\n"))
	c := podStatus(t, f.rt, "uid-pipes").LatestContainer("c")
	if c == nil || c.State != runtime.StateExited || c.ExitCode != 0 || c.Reason != "Completed" {
		t.Errorf("status = %+v", c)
	}
	if s := podStatus(t, f.rt, "uid-pipes").LatestSandbox(); s.Attempt != 1 {
		t.Errorf("sandbox attempt = %d", s.Attempt)
	}
	if err := f.rt.StopSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if err := f.rt.RemoveSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	assertNothingLeft(t, f.rt)
}

// TestNginxImage runs the nginx test image in a sandbox and fetches its
// page on the pod's loopback from inside the test's network namespace.
// (busybox 1.35 wget segfaults with -T here, hence no timeout flag.)
func TestNginxImage(t *testing.T) {
	f := newFixture(t, true)
	ctx := context.Background()
	tar, refs, err := images.Nginx(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	imported, err := f.rt.ImportArchive(ctx, tar)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(imported, ",") != strings.Join(refs, ",") {
		t.Errorf("imported %v, want %v", imported, refs)
	}
	img, err := f.rt.EnsureImage(ctx, "nginx:1.23", corev1.PullNever)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := hosttools.Command("ip", "-n", filepath.Base(f.netns), "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up: %v: %s", err, out)
	}
	pod := testPod("nginx", corev1.Container{Name: "nginx", Image: "nginx:1.23"})
	sb, err := f.rt.RunSandbox(ctx, pod, runtime.SandboxConfig{Image: f.pause, NetNSPath: f.netns})
	if err != nil {
		t.Fatal(err)
	}
	id, err := f.rt.CreateContainer(ctx, pod, &pod.Spec.Containers[0], runtime.ContainerConfig{SandboxID: sb, Image: img, ImageName: "nginx:1.23"})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	var page []byte
	testkit.Eventually(t, 10*time.Second, "nginx to serve its page", func() (bool, error) {
		page, err = hosttools.Command("nsenter", "--net="+f.netns, images.BusyboxBinary, "wget", "-q", "-O-", "http://127.0.0.1/").CombinedOutput()
		if err != nil {
			return false, fmt.Errorf("%v: %s", err, page)
		}
		return true, nil
	})
	if !strings.Contains(string(page), "Welcome to nginx!") {
		t.Fatalf("nginx page: %v: %s", err, page)
	}
	waitLog(t, filepath.Join(f.logRoot, "default_nginx_uid-nginx", "nginx", "0.log"), `"GET / HTTP/1.1" 200`)
	if err := f.rt.StopContainer(ctx, id, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := f.rt.RemoveSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	assertNothingLeft(t, f.rt)
}

// startContainerLogger runs a container logger on dir for the test's
// duration and returns a client of it.
func startContainerLogger(t *testing.T, dir string) *containerlogs.Client {
	t.Helper()
	l, err := containerlogs.New(containerlogs.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	// Cleanups run in reverse: the logger stops after the runtime's.
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("container logger: %v", err)
		}
	})
	return containerlogs.NewClient(containerlogs.ClientConfig{Dir: dir, Rotation: containerlogs.Rotation{MaxSize: containerlogs.DefaultMaxSize, MaxFiles: containerlogs.DefaultMaxFiles}})
}
