package cgroups

// Tests of the cgroup v2 paths over a fake cgroup filesystem in a temporary
// directory. opencontainers/cgroups' fs2 manager writes the values for real
// (its TestMode lets it write plain files); only creating and removing the
// directories is faked, since fs2.CreateCgroupPath insists on
// /sys/fs/cgroup. What needs a real v2 host: the kernel accepting the values
// (the real test, TestRealCgroupfs, covers v2 when run on one) and the
// systemd driver (D-Bus to a running systemd).

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	libcgroups "github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fs2"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/podresources"
)

// useLibTestMode lets opencontainers/cgroups read and write plain files.
// It is a package variable of the library: tests using it must not run in
// parallel with the real-cgroup test.
func useLibTestMode(t *testing.T) {
	old := libcgroups.TestMode
	libcgroups.TestMode = true
	t.Cleanup(func() { libcgroups.TestMode = old })
}

// fakeMkdirV2 creates dir and its parents below mount the way the kernel
// would present them: each new cgroup gets cgroup.controllers and an empty
// cgroup.procs, and each parent enables the controllers for its children.
func fakeMkdirV2(mount string) func(string, *libcgroups.Cgroup) error {
	return func(dir string, _ *libcgroups.Cgroup) error {
		rel, err := filepath.Rel(mount, dir)
		if err != nil || strings.HasPrefix(rel, "..") {
			return errors.New("fake cgroupfs: path outside mount: " + dir)
		}
		cur := mount
		for _, part := range strings.Split(rel, "/") {
			if err := os.WriteFile(filepath.Join(cur, "cgroup.subtree_control"), []byte("+cpu +memory +pids"), 0o644); err != nil {
				return err
			}
			cur = filepath.Join(cur, part)
			if err := os.Mkdir(cur, 0o755); errors.Is(err, os.ErrExist) {
				continue
			} else if err != nil {
				return err
			}
			for file, content := range map[string]string{"cgroup.controllers": "cpu memory pids\n", "cgroup.procs": ""} {
				if err := os.WriteFile(filepath.Join(cur, file), []byte(content), 0o644); err != nil {
					return err
				}
			}
		}
		return nil
	}
}

// fakeRmdir removes a fake cgroup like rmdir(2) on cgroupfs: missing is
// fine, and a cgroup with processes or child cgroups is EBUSY.
func fakeRmdir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	procs, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	busy := len(strings.TrimSpace(string(procs))) > 0
	for _, e := range entries {
		busy = busy || e.IsDir()
	}
	if busy {
		return &os.PathError{Op: "rmdir", Path: dir, Err: unix.EBUSY}
	}
	return os.RemoveAll(dir)
}

func newFakeV2(t *testing.T, driver Driver, cfg Config) (*manager, string) {
	t.Helper()
	useLibTestMode(t)
	mount := t.TempDir()
	ops := newLibOps(driver, ModeV2)
	ops.unifiedMount = mount
	ops.mkdirV2 = fakeMkdirV2(mount)
	ops.rmdir = fakeRmdir
	return newManager(cfg, driver, ops), mount
}

func readTrim(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("read %s: %v", path, err)
		return ""
	}
	return strings.TrimSpace(string(b))
}

func expectFiles(t *testing.T, dir string, want map[string]string) {
	t.Helper()
	for file, v := range want {
		path := filepath.Join(dir, file)
		if v == "" {
			if _, err := os.Stat(path); err == nil {
				t.Errorf("%s was written (%q), want it untouched", path, readTrim(t, path))
			}
			continue
		}
		if got := readTrim(t, path); got != v {
			t.Errorf("%s = %q, want %q", path, got, v)
		}
	}
}

func TestFakeV2Cgroupfs(t *testing.T) {
	ctx := context.Background()
	m, mount := newFakeV2(t, DriverCgroupfs, Config{
		Root: "/nodelet", PidsLimit: 100, RemoveTimeout: 200 * time.Millisecond,
		Allocatable: rl(t, "cpu=2,memory=4Gi"),
	})
	g := mkPod("11111111-aaaa", []corev1.Container{ctr(t, "a", "cpu=500m,memory=128Mi", "cpu=500m,memory=128Mi")})
	b := mkPod("22222222-bbbb", []corev1.Container{ctr(t, "a", "cpu=250m,memory=64Mi", "cpu=1")})
	be := mkPod("33333333-cccc", []corev1.Container{ctr(t, "a", "", "")})

	if err := m.EnsureQoS(ctx); err != nil {
		t.Fatalf("EnsureQoS: %v", err)
	}
	kubepods := filepath.Join(mount, "nodelet/kubepods")
	expectFiles(t, kubepods, map[string]string{"cpu.weight": "79", "memory.max": "4294967296", "pids.max": ""})
	expectFiles(t, filepath.Join(kubepods, "besteffort"), map[string]string{"cpu.weight": "1"})
	expectFiles(t, filepath.Join(kubepods, "burstable"), map[string]string{"cpu.weight": ""})

	if err := m.UpdateQoS(ctx, []*corev1.Pod{g, b, be}); err != nil {
		t.Fatalf("UpdateQoS: %v", err)
	}
	expectFiles(t, filepath.Join(kubepods, "burstable"), map[string]string{"cpu.weight": "10"})

	for _, tc := range []struct {
		pod  *corev1.Pod
		path string
		want map[string]string
	}{
		{g, "/nodelet/kubepods/pod11111111-aaaa", map[string]string{
			"cpu.weight": "20", "cpu.max": "50000 100000", "memory.max": "134217728", "pids.max": "100"}},
		{b, "/nodelet/kubepods/burstable/pod22222222-bbbb", map[string]string{
			"cpu.weight": "10", "cpu.max": "100000 100000", "memory.max": "", "pids.max": "100"}},
		{be, "/nodelet/kubepods/besteffort/pod33333333-cccc", map[string]string{
			"cpu.weight": "1", "cpu.max": "", "memory.max": "", "pids.max": "100"}},
	} {
		path, err := m.EnsurePod(ctx, tc.pod)
		if err != nil {
			t.Fatalf("EnsurePod(%s): %v", tc.pod.Name, err)
		}
		if path != tc.path {
			t.Errorf("EnsurePod(%s) = %s, want %s", tc.pod.Name, path, tc.path)
		}
		expectFiles(t, filepath.Join(mount, path), tc.want)
		if !m.PodExists(tc.pod.UID) {
			t.Errorf("PodExists(%s) = false after EnsurePod", tc.pod.UID)
		}
	}
	// EnsurePod again rewrites, it does not fail.
	if _, err := m.EnsurePod(ctx, g); err != nil {
		t.Fatalf("EnsurePod again: %v", err)
	}

	uids, err := m.ListPods()
	if err != nil {
		t.Fatalf("ListPods: %v", err)
	}
	if want := []types.UID{g.UID, b.UID, be.UID}; !slices.Equal(uids, want) {
		t.Errorf("ListPods = %v, want %v", uids, want)
	}

	checkFakeRemoval(t, m, filepath.Join(mount, "nodelet/kubepods/pod11111111-aaaa/cgroup.procs"), g, b, be)
}

// checkFakeRemoval removes the pods; g has a process (written into procs)
// that RemovePod must wait for.
func checkFakeRemoval(t *testing.T, m *manager, procs string, g, b, be *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	// A process left in the pod: RemovePod retries, then reports ErrBusy.
	if err := os.WriteFile(procs, []byte("4242\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := m.RemovePod(ctx, g.UID)
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("RemovePod with a process = %v, want ErrBusy", err)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("RemovePod gave up after %v, want about the 200ms RemoveTimeout", d)
	}
	// The process goes away while RemovePod waits: it succeeds.
	go func() {
		time.Sleep(100 * time.Millisecond)
		_ = os.WriteFile(procs, nil, 0o644)
	}()
	if err := m.RemovePod(ctx, g.UID); err != nil {
		t.Fatalf("RemovePod after the process left: %v", err)
	}
	if m.PodExists(g.UID) {
		t.Errorf("PodExists after RemovePod")
	}
	for _, pod := range []*corev1.Pod{g, b, be} {
		for i := 0; i < 2; i++ { // the second time finds nothing: still success
			if err := m.RemovePod(ctx, pod.UID); err != nil {
				t.Errorf("RemovePod(%s) #%d: %v", pod.UID, i, err)
			}
		}
	}
	if uids, err := m.ListPods(); err != nil || len(uids) != 0 {
		t.Errorf("ListPods after removal = %v, %v", uids, err)
	}
	if err := m.RemovePod(ctx, "never-existed"); err != nil {
		t.Errorf("RemovePod(unknown) = %v", err)
	}
}

func TestFakeV2RemoveHonoursContext(t *testing.T) {
	m, mount := newFakeV2(t, DriverCgroupfs, Config{RemoveTimeout: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	pod := mkPod("44444444", []corev1.Container{ctr(t, "a", "", "")})
	if _, err := m.EnsurePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mount, "kubepods/besteffort/pod44444444/cgroup.procs"), []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(100*time.Millisecond, cancel)
	err := m.RemovePod(ctx, pod.UID)
	if !errors.Is(err, ErrBusy) || !errors.Is(err, context.Canceled) {
		t.Fatalf("RemovePod = %v, want ErrBusy and context.Canceled", err)
	}
	if _, err := m.EnsurePod(ctx, pod); !errors.Is(err, context.Canceled) {
		t.Errorf("EnsurePod with a cancelled context = %v", err)
	}
}

// The systemd driver needs D-Bus to create slices; its layout (where the
// nodelet looks for pods) is checked over a fake tree.
func TestFakeV2SystemdLayout(t *testing.T) {
	useLibTestMode(t)
	mount := t.TempDir()
	ops := newLibOps(DriverSystemd, ModeV2)
	ops.unifiedMount = mount
	m := newManager(Config{}, DriverSystemd, ops)

	const g, b = types.UID("aaaa-1111"), types.UID("bbbb-2222")
	for _, dir := range []string{
		"kubepods.slice/kubepods-podaaaa_1111.slice/cri-containerd-x.scope",
		"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podbbbb_2222.slice",
		"kubepods.slice/kubepods-besteffort.slice",
		"system.slice/kubepods-besteffort-podcccc_3333.slice", // not ours
	} {
		if err := os.MkdirAll(filepath.Join(mount, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	uids, err := m.ListPods()
	if err != nil {
		t.Fatalf("ListPods: %v", err)
	}
	if want := []types.UID{g, b}; !slices.Equal(uids, want) {
		t.Errorf("ListPods = %v, want %v", uids, want)
	}
	if !m.PodExists(g) || !m.PodExists(b) || m.PodExists("cccc-3333") {
		t.Errorf("PodExists = %v %v %v, want true true false", m.PodExists(g), m.PodExists(b), m.PodExists("cccc-3333"))
	}
	dirs, err := ops.dirs(PodName(nil, corev1.PodQOSBurstable, b))
	if err != nil || len(dirs) != 1 ||
		dirs[0] != filepath.Join(mount, "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podbbbb_2222.slice") {
		t.Errorf("dirs = %v, %v", dirs, err)
	}
}

// What the systemd driver writes on v2 for a pod slice. Its UnifiedManager
// (opencontainers/cgroups systemd/v2.go) sets the unit's properties over
// D-Bus (CPUWeight, CPUQuotaPerSecUSec with CPUQuotaPeriodUSec, MemoryMax,
// TasksMax, from the same Resources) and then runs fs2's Set on the
// slice's directory; that second half runs here on a fake tree, so the
// test checks that the driver's description of the slice carries all four
// values and where they land.
func TestFakeV2SystemdPodSliceValues(t *testing.T) {
	useLibTestMode(t)
	mount := t.TempDir()
	ops := newLibOps(DriverSystemd, ModeV2)
	ops.unifiedMount = mount
	g := mkPod("11111111-aaaa", []corev1.Container{ctr(t, "a", "cpu=500m,memory=128Mi", "cpu=500m,memory=128Mi")})
	b := mkPod("22222222-bbbb", []corev1.Container{ctr(t, "a", "cpu=250m,memory=64Mi", "cpu=1")})
	for _, tc := range []struct {
		pod          *corev1.Pod
		parent, unit string
		dir          string
		want         map[string]string
	}{
		{g, "kubepods.slice", "kubepods-pod11111111_aaaa.slice",
			"kubepods.slice/kubepods-pod11111111_aaaa.slice", map[string]string{
				"cpu.weight": "20", "cpu.max": "50000 100000", "memory.max": "134217728", "pids.max": "100"}},
		{b, "kubepods-burstable.slice", "kubepods-burstable-pod22222222_bbbb.slice",
			"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod22222222_bbbb.slice", map[string]string{
				"cpu.weight": "10", "cpu.max": "100000 100000", "memory.max": "", "pids.max": "100"}},
	} {
		n := PodName(nil, podresources.QOSClass(tc.pod), tc.pod.UID)
		c := libConfig(DriverSystemd, ModeV2, n, PodResources(tc.pod, 100))
		if !c.Systemd || c.Parent != tc.parent || c.Name != tc.unit || c.Path != "" {
			t.Errorf("%s: systemd %v parent %q unit %q path %q; want parent %q unit %q",
				tc.pod.Name, c.Systemd, c.Parent, c.Name, c.Path, tc.parent, tc.unit)
		}
		dir := ops.v2Dir(n)
		if want := filepath.Join(mount, tc.dir); dir != want {
			t.Errorf("%s: dir %s, want %s", tc.pod.Name, dir, want)
		}
		if err := fakeMkdirV2(mount)(dir, c); err != nil {
			t.Fatal(err)
		}
		fsMgr, err := fs2.NewManager(c, dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := fsMgr.Set(c.Resources); err != nil {
			t.Fatalf("%s: fs2 Set: %v", tc.pod.Name, err)
		}
		expectFiles(t, dir, tc.want)
	}
}
