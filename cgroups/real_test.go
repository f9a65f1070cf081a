package cgroups

// A test against this host's real cgroups, as root, with the cgroupfs
// driver. Everything lives under a test-only root /nodelet-test-<random> in
// each hierarchy, which t.Cleanup removes even when the test fails. It runs
// on v1 (these machines) and on v2 (expected files differ); the systemd
// driver is not exercised here.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	libcgroups "github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/hosttools"
	"github.com/nodelet/nodelet/test/testkit"
)

const cgroupMount = "/sys/fs/cgroup"

// cgroupHierarchies lists the mounted cgroup hierarchies: /sys/fs/cgroup on
// v2, each /sys/fs/cgroup/<controller> (and unified, name=systemd) on v1.
func cgroupHierarchies(t *testing.T) []string {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(cgroupMount, &st); err != nil {
		t.Fatalf("statfs %s: %v", cgroupMount, err)
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		return []string{cgroupMount}
	}
	entries, err := os.ReadDir(cgroupMount)
	if err != nil {
		t.Fatalf("read %s: %v", cgroupMount, err)
	}
	var out []string
	for _, e := range entries {
		p := filepath.Join(cgroupMount, e.Name())
		if err := unix.Statfs(p, &st); err != nil || e.Type()&os.ModeSymlink != 0 {
			continue
		}
		if st.Type == unix.CGROUP_SUPER_MAGIC || st.Type == unix.CGROUP2_SUPER_MAGIC {
			out = append(out, p)
		}
	}
	return out
}

// testCgroupRoot makes a unique cgroup root for this test and registers its
// removal from every hierarchy.
func testCgroupRoot(t *testing.T) string {
	t.Helper()
	testkit.RequireRoot(t, "manipulates real cgroups")
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	root := "/nodelet-test-" + hex.EncodeToString(b)
	hierarchies := cgroupHierarchies(t)
	if len(hierarchies) == 0 {
		t.Fatalf("no cgroup hierarchy mounted under %s", cgroupMount)
	}
	t.Cleanup(func() {
		for _, h := range hierarchies {
			dir := filepath.Join(h, root)
			if err := libcgroups.RemovePath(dir); err != nil {
				t.Errorf("cleanup: remove %s: %v", dir, err)
			}
		}
	})
	return root
}

// startSleep starts a sleep that t.Cleanup kills (if still running).
func startSleep(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := hosttools.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sleep: %v", err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd
}

// controllerFile maps a v2 file name to where v1 keeps the same value.
func controllerFile(v2 bool, file string) (controller, name string) {
	if v2 {
		return "", file
	}
	switch file {
	case "cpu.weight":
		return "cpu", "cpu.shares"
	case "cpu.max":
		return "cpu", "cpu.cfs_quota_us"
	case "cpu.cfs_period_us":
		return "cpu", file
	case "memory.max":
		return "memory", "memory.limit_in_bytes"
	case "pids.max", "pids.current":
		return "pids", file
	}
	return "", file
}

func TestRealCgroupfs(t *testing.T) {
	root := testCgroupRoot(t)
	v2 := DetectMode() == ModeV2
	ctx := context.Background()
	m, err := New(Config{
		Driver: "cgroupfs", Root: root, PidsLimit: 64, RemoveTimeout: 300 * time.Millisecond,
		Allocatable: rl(t, "cpu=1,memory=1Gi"),
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	// want reads a value at cgroup path (cgroupfs spelling) as the v2 file
	// name says, translated for v1. v1/v2 give the expected values per mode.
	want := func(path, file, v1Val, v2Val string) {
		t.Helper()
		ctrl, name := controllerFile(v2, file)
		exp := v1Val
		if v2 {
			exp = v2Val
		}
		if got := readTrim(t, filepath.Join(cgroupMount, ctrl, path, name)); got != exp {
			t.Errorf("%s/%s = %q, want %q", path, name, got, exp)
		}
	}
	if err := m.EnsureQoS(ctx); err != nil {
		t.Fatalf("EnsureQoS: %v", err)
	}
	if err := m.EnsureQoS(ctx); err != nil {
		t.Fatalf("EnsureQoS again: %v", err)
	}
	kp := root + "/kubepods"
	want(kp, "cpu.weight", "1024", "39")
	want(kp, "memory.max", "1073741824", "1073741824")
	want(kp+"/besteffort", "cpu.weight", "2", "1")

	g := mkPod("6d1f0a2e-0000-4000-8000-00000000000a", []corev1.Container{
		ctr(t, "a", "cpu=500m,memory=128Mi", "cpu=500m,memory=128Mi")})
	b := mkPod("6d1f0a2e-0000-4000-8000-00000000000b", []corev1.Container{
		ctr(t, "a", "cpu=250m,memory=64Mi", "cpu=1")})
	if err := m.UpdateQoS(ctx, []*corev1.Pod{g, b}); err != nil {
		t.Fatalf("UpdateQoS: %v", err)
	}
	want(kp+"/burstable", "cpu.weight", "256", "10")
	checkRealPods(t, m, g, b, want)
}

// checkRealPods creates a Guaranteed pod g and a Burstable pod b, checks
// their values, and removes them (g with a real process in it first).
func checkRealPods(t *testing.T, m Manager, g, b *corev1.Pod, want func(path, file, v1Val, v2Val string)) {
	t.Helper()
	ctx := context.Background()
	v2 := DetectMode() == ModeV2
	const unlimitedMem = "9223372036854771712" // v1 memory.limit_in_bytes default on 4k pages
	kp := m.(*manager).root.Child("kubepods").Cgroupfs()
	gPath, err := m.EnsurePod(ctx, g)
	if err != nil {
		t.Fatalf("EnsurePod(guaranteed): %v", err)
	}
	if gPath != kp+"/pod"+string(g.UID) {
		t.Errorf("guaranteed pod path = %s", gPath)
	}
	want(gPath, "cpu.weight", "512", "20")
	want(gPath, "memory.max", "134217728", "134217728")
	want(gPath, "pids.max", "64", "64")
	if v2 {
		want(gPath, "cpu.max", "", "50000 100000")
	} else {
		want(gPath, "cpu.max", "50000", "")
		want(gPath, "cpu.cfs_period_us", "100000", "")
	}

	bPath, err := m.EnsurePod(ctx, b)
	if err != nil {
		t.Fatalf("EnsurePod(burstable): %v", err)
	}
	if bPath != kp+"/burstable/pod"+string(b.UID) {
		t.Errorf("burstable pod path = %s", bPath)
	}
	want(bPath, "cpu.weight", "256", "10")
	want(bPath, "cpu.max", "100000", "100000 100000")
	want(bPath, "memory.max", unlimitedMem, "max")
	want(bPath, "pids.max", "64", "64")

	uids, err := m.ListPods()
	if err != nil || !slices.Equal(uids, []types.UID{g.UID, b.UID}) {
		t.Errorf("ListPods = %v, %v; want both pods", uids, err)
	}
	if !m.PodExists(g.UID) || !m.PodExists(b.UID) || m.PodExists("nope") {
		t.Errorf("PodExists wrong")
	}

	checkProcessAccounting(t, m, g, gPath, want)
	if err := m.RemovePod(ctx, b.UID); err != nil {
		t.Errorf("RemovePod(burstable): %v", err)
	}
	if uids, err := m.ListPods(); err != nil || len(uids) != 0 {
		t.Errorf("ListPods after removal = %v, %v", uids, err)
	}
	for _, h := range cgroupHierarchies(t) {
		for _, p := range []string{gPath, bPath} {
			if _, err := os.Stat(filepath.Join(h, p)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s still there after RemovePod (%v)", filepath.Join(h, p), err)
			}
		}
	}
}

// checkProcessAccounting puts a real process into pod g's cgroup, checks the
// kernel accounts it there, checks RemovePod refuses while it runs, and
// removes the pod once it has exited.
func checkProcessAccounting(t *testing.T, m Manager, g *corev1.Pod, gPath string,
	want func(path, file, v1Val, v2Val string)) {
	t.Helper()
	ctx := context.Background()
	mgr := m.(*manager)
	dirs, err := mgr.ops.dirs(PodName(mgr.root, corev1.PodQOSGuaranteed, g.UID))
	if err != nil {
		t.Fatalf("dirs: %v", err)
	}
	sleep := startSleep(t)
	pid := sleep.Process.Pid
	for _, dir := range dirs {
		if !libcgroups.PathExists(dir) {
			continue // devices: created by the runtime for containers
		}
		if err := libcgroups.WriteCgroupProc(dir, pid); err != nil {
			t.Fatalf("move sleep into %s: %v", dir, err)
		}
	}
	want(gPath, "pids.current", "1", "1")
	procCgroup, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(procCgroup)), "\n") {
		if strings.Contains(line, ":devices:") {
			continue // pod cgroups skip devices, as the kubelet's
		}
		if !strings.HasSuffix(line, ":"+gPath) {
			t.Errorf("/proc/%d/cgroup line %q: not in the pod cgroup %s", pid, line, gPath)
		}
	}
	if pids, err := mgr.ops.pids(PodName(mgr.root, corev1.PodQOSGuaranteed, g.UID)); err != nil || !slices.Equal(pids, []int{pid}) {
		t.Errorf("pids = %v, %v; want [%d]", pids, err, pid)
	}

	err = m.RemovePod(ctx, g.UID)
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("RemovePod with a running process = %v, want ErrBusy", err)
	}
	if !m.PodExists(g.UID) {
		t.Fatalf("pod cgroup gone although RemovePod failed")
	}
	if err := sleep.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = sleep.Wait()
	if err := m.RemovePod(ctx, g.UID); err != nil {
		t.Fatalf("RemovePod after the process exited: %v", err)
	}
	if err := m.RemovePod(ctx, g.UID); err != nil {
		t.Errorf("RemovePod again: %v", err)
	}
	if m.PodExists(g.UID) {
		t.Errorf("PodExists after RemovePod")
	}
}

// The systemd driver cannot create slices here (no systemd), but where it
// would put a pod's cgroup in this host's hierarchies is computed by
// opencontainers/cgroups from the real mounts; read-only.
func TestSystemdDirsOnThisHost(t *testing.T) {
	mode := DetectMode()
	ops := newLibOps(DriverSystemd, mode)
	n := PodName(ParseRoot("/"), corev1.PodQOSBurstable, testUID)
	dirs, err := ops.dirs(n)
	if err != nil {
		t.Fatalf("dirs: %v", err)
	}
	wantSuffix := "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f5c2a1e_7b3d_4c1a_9e2f_1a2b3c4d5e6f.slice"
	var sawCPU bool
	for _, d := range dirs {
		if !strings.HasPrefix(d, cgroupMount+"/") || !strings.HasSuffix(d, wantSuffix) {
			t.Errorf("dir %s: want %s/.../%s", d, cgroupMount, wantSuffix)
		}
		sawCPU = sawCPU || d == cgroupMount+"/cpu"+wantSuffix || d == cgroupMount+wantSuffix
	}
	if !sawCPU {
		t.Errorf("dirs %v: none in the cpu hierarchy (mode %s)", dirs, mode)
	}
	if ops.exists(n) {
		t.Errorf("exists = true for a pod never created")
	}
}

// Pod workers call the manager concurrently: many pods at once, with
// UpdateQoS in between.
func TestRealConcurrentPods(t *testing.T) {
	root := testCgroupRoot(t)
	ctx := context.Background()
	m, err := New(Config{Driver: "cgroupfs", Root: root, PidsLimit: 32})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := m.EnsureQoS(ctx); err != nil {
		t.Fatalf("EnsureQoS: %v", err)
	}
	var pods []*corev1.Pod
	for i := range 12 {
		uid := "c0ffee00-0000-4000-8000-0000000000" + strconv.Itoa(10+i)
		switch i % 3 {
		case 0:
			pods = append(pods, mkPod(uid, []corev1.Container{ctr(t, "a", "cpu=100m,memory=32Mi", "cpu=100m,memory=32Mi")}))
		case 1:
			pods = append(pods, mkPod(uid, []corev1.Container{ctr(t, "a", "cpu=100m", "")}))
		default:
			pods = append(pods, mkPod(uid, []corev1.Container{ctr(t, "a", "", "")}))
		}
	}
	run := func(f func(p *corev1.Pod) error) {
		t.Helper()
		errs := make(chan error, len(pods)+1)
		for _, p := range pods {
			go func() { errs <- f(p) }()
		}
		go func() { errs <- m.UpdateQoS(ctx, pods) }()
		for range len(pods) + 1 {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
	}
	run(func(p *corev1.Pod) error { _, err := m.EnsurePod(ctx, p); return err })
	if uids, err := m.ListPods(); err != nil || len(uids) != len(pods) {
		t.Fatalf("ListPods = %d pods, %v; want %d", len(uids), err, len(pods))
	}
	run(func(p *corev1.Pod) error { return m.RemovePod(ctx, p.UID) })
	if uids, err := m.ListPods(); err != nil || len(uids) != 0 {
		t.Errorf("ListPods after removal = %v, %v", uids, err)
	}
}
