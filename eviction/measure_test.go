package eviction

import (
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/cgroups"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

const meminfo = `MemTotal:        4194304 kB
MemFree:         1048576 kB
MemAvailable:    3000000 kB
Buffers:           10000 kB
Inactive(file):   524288 kB
`

func fakeProc(t *testing.T) string {
	proc := t.TempDir()
	write(t, filepath.Join(proc, "meminfo"), meminfo)
	write(t, filepath.Join(proc, "loadavg"), "0.50 0.40 0.30 2/345 12345\n")
	write(t, filepath.Join(proc, "sys/kernel/pid_max"), "32768\n")
	write(t, filepath.Join(proc, "sys/kernel/threads-max"), "192731\n")
	return proc
}

func TestHostObserveV1(t *testing.T) {
	memRoot := t.TempDir()
	write(t, filepath.Join(memRoot, "memory.usage_in_bytes"), "2147483648\n") // 2Gi
	write(t, filepath.Join(memRoot, "memory.stat"), "cache 1\ninactive_file 7\ntotal_inactive_file 536870912\n")
	h := Host{ProcRoot: fakeProc(t), MemoryRoot: memRoot, NodeFS: t.TempDir()}
	obs, err := h.Observe()
	if err != nil {
		t.Fatal(err)
	}
	// 4Gi - (2Gi - 512Mi of the root's total_inactive_file)
	if got := obs[MemoryAvailable]; got.Capacity != 4<<30 || got.Available != 4<<30-(2<<30-512<<20) {
		t.Errorf("memory = %+v", got)
	}
	// min(pid_max, threads-max) - tasks
	if got := obs[PIDAvailable]; got.Capacity != 32768 || got.Available != 32768-345 {
		t.Errorf("pids = %+v", got)
	}
	if got := obs[NodeFSAvailable]; got.Capacity <= 0 || got.Available <= 0 || got.Available > got.Capacity {
		t.Errorf("nodefs = %+v", got)
	}
	if _, ok := obs[ImageFSAvailable]; ok {
		t.Error("imagefs measured without a path")
	}
}

// On v2 the root cgroup has no memory.current: /proc/meminfo gives
// usage (MemTotal - MemFree) and Inactive(file), as runc's fs2.
func TestHostObserveV2AndPartialFailure(t *testing.T) {
	h := Host{ProcRoot: fakeProc(t), V2: true, NodeFS: "/nonexistent/nodelet", ImageFS: t.TempDir()}
	obs, err := h.Observe()
	if err == nil {
		t.Error("statfs of a missing nodefs: no error")
	}
	if got := obs[MemoryAvailable]; got.Available != 4<<30-(3<<30-512<<20) {
		t.Errorf("memory = %+v", got)
	}
	if _, ok := obs[NodeFSAvailable]; ok {
		t.Error("failed nodefs reported")
	}
	if _, ok := obs[ImageFSInodesFree]; !ok {
		t.Error("imagefs inodes not measured")
	}
}

func TestPodStatsV1AndV2(t *testing.T) {
	p := pod("web", mem("100Mi"), nil, 0) // Burstable
	name := cgroups.PodName(cgroups.ParseRoot("/nodelet-test"), corev1.PodQOSBurstable, p.UID)

	v1mem, v1pids := t.TempDir(), t.TempDir()
	dir := filepath.Join(v1mem, name.Cgroupfs())
	write(t, filepath.Join(dir, "memory.usage_in_bytes"), "104857600\n")
	write(t, filepath.Join(dir, "memory.stat"), "total_inactive_file 10485760\n")
	write(t, filepath.Join(v1pids, name.Cgroupfs(), "pids.current"), "7\n")
	logs := t.TempDir()
	write(t, filepath.Join(logs, "c", "0.log"), string(make([]byte, 64<<10)))
	r := PodStatsReader{Cgroups: PodCgroups{Driver: cgroups.DriverCgroupfs, Root: cgroups.ParseRoot("/nodelet-test"),
		MemoryRoot: v1mem, PidsRoot: v1pids}, DiskDirs: func(*corev1.Pod) []string { return []string{logs, "/nonexistent"} }}
	got := r.Read([]*corev1.Pod{p}, corev1.ResourceMemory)[p.UID]
	if got.Memory != 90<<20 || got.Processes != 7 || got.Disk != 0 {
		t.Errorf("v1 memory ranking stats = %+v (disk is not walked for memory)", got)
	}
	got = r.Read([]*corev1.Pod{p}, corev1.ResourceEphemeralStorage)[p.UID]
	if got.Disk < 64<<10 || got.Inodes != 3 { // logs dir, c, 0.log
		t.Errorf("v1 disk stats = %+v", got)
	}

	unified := t.TempDir()
	sd := cgroups.PodName(nil, corev1.PodQOSBurstable, p.UID).Systemd()
	write(t, filepath.Join(unified, sd, "memory.current"), "209715200\n")
	write(t, filepath.Join(unified, sd, "memory.stat"), "anon 1\ninactive_file 104857600\n")
	write(t, filepath.Join(unified, sd, "pids.current"), "3\n")
	r = PodStatsReader{Cgroups: PodCgroups{Driver: cgroups.DriverSystemd, V2: true, Unified: unified}}
	if got := r.Read([]*corev1.Pod{p}, corev1.ResourceMemory)[p.UID]; got.Memory != 100<<20 || got.Processes != 3 {
		t.Errorf("v2 systemd stats = %+v", got)
	}
	other := pod("gone", nil, nil, 0)
	if _, ok := r.Read([]*corev1.Pod{other}, corev1.ResourceMemory)[other.UID]; ok {
		t.Error("a pod without a cgroup has stats")
	}
}

// The real host: every signal is measured and sane (v1 here, v2 elsewhere).
func TestHostObserveReal(t *testing.T) {
	pc, err := DetectCgroups(cgroups.DriverCgroupfs, "/")
	if err != nil {
		t.Fatal("this test measures the host's cgroups, and found none:", err)
	}
	obs, err := Host{V2: pc.V2, MemoryRoot: pc.MemoryRoot, NodeFS: t.TempDir(), ImageFS: "/"}.Observe()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []Signal{MemoryAvailable, NodeFSAvailable, NodeFSInodesFree, ImageFSAvailable, PIDAvailable} {
		o, ok := obs[s]
		if !ok || o.Capacity <= 0 || o.Available <= 0 || o.Available > o.Capacity {
			t.Errorf("%s = %+v, %v", s, o, ok)
		}
	}
}
