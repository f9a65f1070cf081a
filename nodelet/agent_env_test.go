package nodelet

// The agent tests' fixture: a real agent in a node netns on a private
// containerd and a test control plane.

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nodelet/nodelet/cgroups"
	"github.com/nodelet/nodelet/controlplane/controlplanetest"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/containerd"
	"github.com/nodelet/nodelet/runtime/runtimetest"
	"github.com/nodelet/nodelet/test/images"
	"github.com/nodelet/nodelet/test/testkit"
)

// podCIDR is the node's pod range in the agent tests.
const podCIDR = "10.77.0.0/24"

// agentEnv is a node netns with containerd, an API server and a running
// Agent.
type agentEnv struct {
	client   kubernetes.Interface
	ctdAddr  string
	cgRoot   string
	netnsDir string
	cfg      Config
	stop     func() // stops the agent and waits for Run to return
}

func startAgent(t *testing.T, base string) *agentEnv {
	t.Helper()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	dir := t.TempDir()
	env := &agentEnv{cgRoot: testkit.CgroupRoot(t, "nodelet-agent-test"), netnsDir: filepath.Join(base, "netns")}
	env.ctdAddr = runtimetest.StartContainerd(t) // its cleanup runs before the cgroup root's
	srv := controlplanetest.Start(t, controlplanetest.Options{})
	env.client = srv.Clientset(t)

	pauseBin, err := images.BuildPause(dir)
	if err != nil {
		t.Fatal(err)
	}
	imageDir := filepath.Join(dir, "images")
	if _, _, err := images.Busybox(imageDir); err != nil {
		t.Fatal(err)
	}
	env.cfg = Config{
		RestConfig: srv.Config, NodeName: agentNode, RootDir: filepath.Join(base, "root"),
		ContainerdAddress: env.ctdAddr, RuncRoot: filepath.Join(dir, "runc"), StateDir: filepath.Join(dir, "state"),
		LogRoot: filepath.Join(dir, "pods"), CNIBinDirs: []string{"/usr/lib/cni"}, CNIConfDir: filepath.Join(base, "net.d"),
		NetNSDir: env.netnsDir, BridgeName: "nlagent0", NetworkName: "nodelet-agent-test",
		CgroupDriver: "cgroupfs", CgroupRoot: env.cgRoot, PauseBinary: pauseBin, ImageDir: imageDir,
		NodeIP: "10.77.1.1", PodCIDR: podCIDR, ClusterDNS: []string{"10.96.0.10"}, Log: log,
		Port: -1, // the API is tested in test/e2e
		// The test runs in the host's netns, where another run of these
		// tests (or a node agent) may hold 10248; healthz_test.go tests it.
		HealthzPort: -1,
	}
	env.start(t)
	return env
}

// start runs a new Agent; env.stop stops it. Cleanup stops it before
// containerd and the API server go.
func (env *agentEnv) start(t *testing.T) {
	t.Helper()
	agent, err := New(env.cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- agent.Run(ctx) }()
	stopped := false
	env.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("agent Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("agent did not stop within 30s")
		}
	}
	t.Cleanup(env.stop)
}

func agentPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName: agentNode,
			Containers: []corev1.Container{{
				Name: "app", Image: "busybox:1.36", ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"sh", "-c", "trap 'exit 0' TERM; echo hi; while true; do sleep 1; done"},
			}},
		},
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitRunning waits until the API shows the pod Running and Ready with an
// IP.
func waitRunning(t *testing.T, env *agentEnv, name string) *corev1.Pod {
	t.Helper()
	start := time.Now()
	for {
		cur, err := env.client.CoreV1().Pods("default").Get(t.Context(), name, metav1.GetOptions{})
		if err == nil && cur.Status.Phase == corev1.PodRunning && cur.Status.PodIP != "" && podReady(cur) {
			t.Logf("pod %s Running and Ready after %v, IP %s", name, time.Since(start), cur.Status.PodIP)
			return cur
		}
		if time.Since(start) > 90*time.Second {
			t.Fatalf("pod %s not Running+Ready after 90s: %v; status %+v", name, err, cur.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// deleteAndWait deletes the pod (default grace) and waits until the API
// object is gone (the node confirmed the deletion).
func deleteAndWait(t *testing.T, env *agentEnv, name string) {
	t.Helper()
	pods := env.client.CoreV1().Pods("default")
	if err := pods.Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for {
		_, err := pods.Get(t.Context(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			t.Logf("pod %s gone from the API %v after deletion", name, time.Since(start))
			return
		}
		if time.Since(start) > 60*time.Second {
			t.Fatalf("pod %s still in the API 60s after deletion: %v", name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitClean waits up to 30s for agentLeftovers to be empty.
func waitClean(t *testing.T, env *agentEnv, all bool, pods ...*corev1.Pod) []string {
	t.Helper()
	var left []string
	for start := time.Now(); time.Since(start) < 30*time.Second; time.Sleep(200 * time.Millisecond) {
		if left = agentLeftovers(t, env, all, pods...); len(left) == 0 {
			break
		}
	}
	return left
}

// runningContainers maps the pods' UIDs to the IDs of their running
// containers, as containerd has them.
func runningContainers(t *testing.T, env *agentEnv) map[string][]string {
	t.Helper()
	rt, err := containerd.New(context.Background(), containerd.Config{Address: env.ctdAddr})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	all, err := rt.PodStatuses(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, p := range all {
		for _, c := range p.Containers {
			if c.State == runtime.StateRunning {
				out[string(p.UID)] = append(out[string(p.UID)], c.ID)
			}
		}
	}
	return out
}

// agentLeftovers lists the containers, sandboxes and cgroups left of pods;
// with all, also any other pod's and any netns.
func agentLeftovers(t *testing.T, env *agentEnv, all bool, pods ...*corev1.Pod) []string {
	t.Helper()
	var out []string
	rt, err := containerd.New(context.Background(), containerd.Config{Address: env.ctdAddr})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	statuses, err := rt.PodStatuses(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	uids := map[types.UID]bool{}
	for _, p := range pods {
		uids[p.UID] = true
	}
	for _, p := range statuses {
		if !all && !uids[p.UID] {
			continue
		}
		out = append(out, fmt.Sprintf("left in containerd: pod %s/%s: %d sandboxes, %d containers", p.Namespace, p.Name, len(p.Sandboxes), len(p.Containers)))
	}
	cg, err := cgroups.New(cgroups.Config{Driver: "cgroupfs", Root: env.cgRoot})
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range pods {
		if cg.PodExists(pod.UID) {
			out = append(out, fmt.Sprintf("pod cgroup of %s left", pod.UID))
		}
	}
	if !all {
		return out
	}
	if entries, err := os.ReadDir(env.netnsDir); err != nil && !os.IsNotExist(err) {
		out = append(out, fmt.Sprintf("read netns dir: %v", err))
	} else if len(entries) != 0 {
		out = append(out, fmt.Sprintf("netns left in %s: %d entries", env.netnsDir, len(entries)))
	}
	ipam := filepath.Join(env.cfg.RootDir, "cni", "networks", env.cfg.NetworkName)
	ips, _ := filepath.Glob(filepath.Join(ipam, "10.*"))
	if len(ips) != 0 {
		out = append(out, fmt.Sprintf("IP allocations left: %v", ips))
	}
	if uids, err := cg.ListPods(); err != nil || len(uids) != 0 {
		out = append(out, fmt.Sprintf("pod cgroups left: %v (%v)", uids, err))
	}
	return out
}

const agentNode = "node-agent"
