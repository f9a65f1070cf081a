package eviction

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	libcgroups "github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/cgroups"
	"github.com/nodelet/nodelet/podresources"
)

// Host measures the node-level signals as upstream defines them (its
// summary API, fed by cAdvisor):
//
//   - memory.available = MemTotal - working set of the root cgroup, the
//     working set being usage - inactive_file. On v1 the root memory
//     cgroup has both (memory.usage_in_bytes, total_inactive_file); on v2
//     the root has no memory.current, and runc's fs2 (which cAdvisor uses)
//     takes MemTotal - MemFree and Inactive(file) from /proc/meminfo.
//   - nodefs.* and imagefs.*: statfs of NodeFS and ImageFS (blocks
//     available to unprivileged users, free inodes).
//   - pid.available = min(kernel.pid_max, kernel.threads-max) - the
//     number of tasks (/proc/loadavg, as upstream: sysinfo(2) truncates).
type Host struct {
	ProcRoot string // "/proc" when empty
	// V2 selects the unified hierarchy's arithmetic; MemoryRoot is v1's
	// memory hierarchy mount (e.g. /sys/fs/cgroup/memory).
	V2         bool
	MemoryRoot string
	// NodeFS is the nodelet's root dir, ImageFS containerd's snapshotter
	// root; an empty path is not measured.
	NodeFS, ImageFS string
}

// Observe measures every signal it can; a signal that fails is left out
// (its thresholds are not met) and the errors are joined.
func (h Host) Observe() (Observations, error) {
	obs := Observations{}
	var errs []error
	if o, err := h.memory(); err != nil {
		errs = append(errs, fmt.Errorf("measure %s: %w", MemoryAvailable, err))
	} else {
		obs[MemoryAvailable] = o
	}
	for _, fsys := range []struct {
		path          string
		bytes, inodes Signal
	}{{h.NodeFS, NodeFSAvailable, NodeFSInodesFree}, {h.ImageFS, ImageFSAvailable, ImageFSInodesFree}} {
		if fsys.path == "" {
			continue
		}
		var st unix.Statfs_t
		if err := unix.Statfs(fsys.path, &st); err != nil {
			errs = append(errs, fmt.Errorf("measure %s: statfs %s: %w", fsys.bytes, fsys.path, err))
			continue
		}
		obs[fsys.bytes] = Observation{Available: int64(st.Bavail) * st.Bsize, Capacity: int64(st.Blocks) * st.Bsize}
		if st.Files > 0 { // some filesystems have no inode count
			obs[fsys.inodes] = Observation{Available: int64(st.Ffree), Capacity: int64(st.Files)}
		}
	}
	if o, err := h.pids(); err != nil {
		errs = append(errs, fmt.Errorf("measure %s: %w", PIDAvailable, err))
	} else {
		obs[PIDAvailable] = o
	}
	return obs, errors.Join(errs...)
}

func (h Host) proc(name string) string {
	root := h.ProcRoot
	if root == "" {
		root = "/proc"
	}
	return filepath.Join(root, name)
}

func (h Host) memory() (Observation, error) {
	mi, err := readKeyValues(h.proc("meminfo"), 1024) // kB
	if err != nil {
		return Observation{}, err
	}
	capacity, ok := mi["MemTotal:"]
	if !ok {
		return Observation{}, errors.New("no MemTotal in meminfo")
	}
	var usage, inactive int64
	if h.V2 {
		usage, inactive = capacity-mi["MemFree:"], mi["Inactive(file):"]
	} else {
		if usage, err = readInt(filepath.Join(h.MemoryRoot, "memory.usage_in_bytes")); err != nil {
			return Observation{}, err
		}
		stat, err := readKeyValues(filepath.Join(h.MemoryRoot, "memory.stat"), 1)
		if err != nil {
			return Observation{}, err
		}
		inactive = stat["total_inactive_file"]
	}
	return Observation{Available: capacity - workingSet(usage, inactive), Capacity: capacity}, nil
}

// workingSet is cAdvisor's: usage - inactive_file, never below 0.
func workingSet(usage, inactiveFile int64) int64 {
	return max(usage-inactiveFile, 0)
}

func (h Host) pids() (Observation, error) {
	limit := int64(-1)
	for _, f := range []string{"sys/kernel/pid_max", "sys/kernel/threads-max"} {
		n, err := readInt(h.proc(f))
		if err != nil {
			return Observation{}, err
		}
		if limit < 0 || n < limit {
			limit = n
		}
	}
	data, err := os.ReadFile(h.proc("loadavg"))
	if err != nil {
		return Observation{}, err
	}
	// "0.00 0.01 0.05 1/91 29984": the fourth field is running/total tasks.
	fields := strings.Fields(string(data))
	if len(fields) < 4 {
		return Observation{}, fmt.Errorf("loadavg %q: too few fields", data)
	}
	_, total, ok := strings.Cut(fields[3], "/")
	n, err := strconv.ParseInt(total, 10, 64)
	if !ok || err != nil {
		return Observation{}, fmt.Errorf("loadavg %q: no task count", data)
	}
	return Observation{Available: limit - n, Capacity: limit}, nil
}

// PodCgroups reads pods' usage from their cgroups, where cgroups.Manager
// puts them (cgroups.PodName under the QoS tier, rendered for the driver).
type PodCgroups struct {
	Driver cgroups.Driver
	Root   cgroups.Name // --cgroup-root
	// V2 with Unified (the hierarchy's mount), or v1 with the memory and
	// pids hierarchies' mounts (PidsRoot may be empty: no process counts).
	V2                            bool
	Unified, MemoryRoot, PidsRoot string
}

// DetectCgroups finds this host's hierarchies for PodCgroups and Host.
func DetectCgroups(driver cgroups.Driver, root string) (PodCgroups, error) {
	pc := PodCgroups{Driver: driver, Root: cgroups.ParseRoot(root), V2: cgroups.DetectMode() == cgroups.ModeV2}
	if pc.V2 {
		pc.Unified = "/sys/fs/cgroup"
		return pc, nil
	}
	var err error
	if pc.MemoryRoot, err = libcgroups.FindCgroupMountpoint("", "memory"); err != nil {
		return pc, fmt.Errorf("find the memory cgroup hierarchy: %w", err)
	}
	pc.PidsRoot, _ = libcgroups.FindCgroupMountpoint("", "pids") // optional
	return pc, nil
}

// Memory and Processes of one pod: its cgroup's working set (usage -
// inactive_file) and task count.
func (c PodCgroups) read(p *corev1.Pod) (memory, processes int64, err error) {
	rel := cgroups.PodName(c.Root, podresources.QOSClass(p), p.UID).Path(c.Driver)
	memDir, pidsDir, usageFile, inactiveKey := filepath.Join(c.MemoryRoot, rel), filepath.Join(c.PidsRoot, rel), "memory.usage_in_bytes", "total_inactive_file"
	if c.V2 {
		memDir, pidsDir, usageFile, inactiveKey = filepath.Join(c.Unified, rel), filepath.Join(c.Unified, rel), "memory.current", "inactive_file"
	}
	usage, err := readInt(filepath.Join(memDir, usageFile))
	if err != nil {
		return 0, 0, fmt.Errorf("memory usage of pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	stat, err := readKeyValues(filepath.Join(memDir, "memory.stat"), 1)
	if err != nil {
		return 0, 0, fmt.Errorf("memory stats of pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	if c.V2 || c.PidsRoot != "" {
		if processes, err = readInt(filepath.Join(pidsDir, "pids.current")); err != nil {
			return 0, 0, fmt.Errorf("pids of pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	return workingSet(usage, stat[inactiveKey]), processes, nil
}

// PodStatsReader measures pods for the ranking.
type PodStatsReader struct {
	Cgroups PodCgroups
	// DiskDirs are the pod's directories whose files count as its disk
	// usage: its logs and its emptyDir volumes (mounts below them, such
	// as memory-backed emptyDirs, are not counted).
	DiskDirs func(*corev1.Pod) []string
}

// Read measures pods; disk usage is walked only when res needs it (it is
// the expensive part). A pod that cannot be measured is left out.
func (r PodStatsReader) Read(pods []*corev1.Pod, res corev1.ResourceName) map[types.UID]PodStats {
	out := make(map[types.UID]PodStats, len(pods))
	for _, p := range pods {
		var s PodStats
		var err error
		if s.Memory, s.Processes, err = r.Cgroups.read(p); err != nil {
			continue
		}
		if (res == corev1.ResourceEphemeralStorage || res == resourceInodes) && r.DiskDirs != nil {
			for _, d := range r.DiskDirs(p) {
				b, n := diskUsage(d)
				s.Disk, s.Inodes = s.Disk+b, s.Inodes+n
			}
		}
		out[p.UID] = s
	}
	return out
}

// diskUsage sums the allocated bytes and counts the inodes below dir,
// staying on dir's filesystem; a missing dir is empty.
func diskUsage(dir string) (bytes, inodes int64) {
	var root unix.Stat_t
	if unix.Lstat(dir, &root) != nil {
		return 0, 0
	}
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // gone meanwhile
		}
		var st unix.Stat_t
		if unix.Lstat(path, &st) != nil {
			return nil
		}
		if st.Dev != root.Dev {
			return filepath.SkipDir
		}
		bytes += st.Blocks * 512
		inodes++
		return nil
	})
	return bytes, inodes
}

// SameFilesystem reports whether a and b are on one filesystem (then there
// is no dedicated image filesystem, and disk pressure on either reclaims
// both containers and images).
func SameFilesystem(a, b string) bool {
	var sa, sb unix.Stat_t
	if unix.Stat(a, &sa) != nil || unix.Stat(b, &sb) != nil {
		return true
	}
	return sa.Dev == sb.Dev
}

func readInt(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", path, err)
	}
	return n, nil
}

// readKeyValues reads "key value [unit]" lines (meminfo, memory.stat),
// multiplying values by unit.
func readKeyValues(path string, unit int64) (map[string]int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		if n, err := strconv.ParseInt(f[1], 10, 64); err == nil {
			out[f[0]] = n * unit
		}
	}
	return out, nil
}
