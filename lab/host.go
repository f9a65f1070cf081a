package lab

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Mounts and cgroups: the two kinds of host state that outlive the lab's
// processes and namespaces unless removed one by one.

// under tells whether path is dir or inside it.
func under(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+"/")
}

// mountsUnder lists the mount points under dirs, in mountinfo order (a
// mount stacked on another comes later).
func mountsUnder(dirs ...string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	defer f.Close()
	unescape := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescape.Replace(fields[4])
		if slices.ContainsFunc(dirs, func(d string) bool { return under(mp, d) }) {
			out = append(out, mp)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	return out, nil
}

// deepestFirst orders mount points for unmounting: children before their
// parents, and of mounts stacked on one point the latest first.
func deepestFirst(mounts []string) []string {
	out := slices.Clone(mounts)
	slices.Reverse(out)
	slices.SortStableFunc(out, func(a, b string) int {
		return strings.Count(b, "/") - strings.Count(a, "/")
	})
	return out
}

// unmountUnder unmounts everything under dirs: pod netns bind mounts,
// container rootfs and snapshot mounts, tmpfs volumes. Lazy unmounts, so a
// mount still busy goes as soon as its last user does.
func unmountUnder(dirs ...string) error {
	for range 5 { // stacked mounts show one layer at a time
		mounts, err := mountsUnder(dirs...)
		if err != nil || len(mounts) == 0 {
			return err
		}
		for _, mp := range deepestFirst(mounts) {
			if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				return fmt.Errorf("unmount %s: %w", mp, err)
			}
		}
	}
	mounts, err := mountsUnder(dirs...)
	if err == nil && len(mounts) > 0 {
		err = fmt.Errorf("mounts remain after unmounting: %s", strings.Join(mounts, ", "))
	}
	return err
}

// cgroupHierarchies are the mounted cgroup hierarchies: /sys/fs/cgroup
// alone on a unified (v2) host; every v1 controller and the cgroup2 mount
// at /sys/fs/cgroup/unified on a hybrid one.
func cgroupHierarchies() []string {
	var st unix.Statfs_t
	if unix.Statfs("/sys/fs/cgroup", &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		return []string{"/sys/fs/cgroup"}
	}
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	var out []string
	for _, e := range entries {
		p := filepath.Join("/sys/fs/cgroup", e.Name())
		// cpu and cpuacct are symlinks to cpu,cpuacct: count it once.
		if e.Type()&os.ModeSymlink != 0 || unix.Statfs(p, &st) != nil {
			continue
		}
		if st.Type == unix.CGROUP_SUPER_MAGIC || st.Type == unix.CGROUP2_SUPER_MAGIC {
			out = append(out, p)
		}
	}
	return out
}

// labCgroups lists the lab's cgroup roots (/nodelet-lab-NAME-nI) that
// exist in any hierarchy, as full paths.
func labCgroups(name string) []string {
	re := regexp.MustCompile(`^nodelet-lab-` + regexp.QuoteMeta(name) + `-n[0-9]+$`)
	var out []string
	for _, h := range cgroupHierarchies() {
		entries, _ := os.ReadDir(h)
		for _, e := range entries {
			if e.IsDir() && re.MatchString(e.Name()) {
				out = append(out, filepath.Join(h, e.Name()))
			}
		}
	}
	return out
}

// cgroupProcs lists the processes anywhere under a cgroup directory.
func cgroupProcs(dir string) []int {
	var out []int
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		data, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		if err != nil {
			return nil
		}
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				out = append(out, pid)
			}
		}
		return nil
	})
	return out
}

// killCgroup SIGKILLs every process under a cgroup directory until none is
// left: containers whose containerd is gone, or that runc lost track of.
func killCgroup(dir string) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		procs := cgroupProcs(dir)
		if len(procs) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s: processes %v survive SIGKILL", dir, procs)
		}
		for _, pid := range procs {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// removeCgroup removes a cgroup directory depth-first (cgroupfs removes
// only empty cgroups, one rmdir each). A cgroup whose last process just
// died can be busy for a moment, so it retries briefly.
func removeCgroup(dir string) error {
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	slices.Reverse(dirs) // children come after their parent in a walk
	for _, d := range dirs {
		var err error
		for try := 0; try < 50; try++ {
			if err = os.Remove(d); err == nil || errors.Is(err, os.ErrNotExist) {
				err = nil
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			return fmt.Errorf("remove cgroup %s: %w", d, err)
		}
	}
	return nil
}
