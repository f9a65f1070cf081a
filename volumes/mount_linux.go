package volumes

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// mountEntry is one line of /proc/self/mountinfo.
type mountEntry struct {
	Point  string
	FSType string
	// Options are the per-mount options (rw,nosuid,...), SuperOptions
	// the file system's (for a tmpfs: size=..., mode=...).
	Options      string
	SuperOptions string
}

// readMounts parses /proc/self/mountinfo.
func readMounts() ([]mountEntry, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	return parseMountInfo(data), nil
}

// parseMountInfo parses mountinfo lines: field 5 is the mount point
// (octal-escaped), field 6 the mount options; after the " - " separator
// come the file system type, the source and the super options.
func parseMountInfo(data []byte) []mountEntry {
	var out []mountEntry
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f := strings.Fields(pre)
		p := strings.Fields(post)
		if len(f) < 6 || len(p) < 1 {
			continue
		}
		e := mountEntry{Point: unescapeOctal(f[4]), FSType: p[0], Options: f[5]}
		if len(p) >= 3 {
			e.SuperOptions = p[2]
		}
		out = append(out, e)
	}
	return out
}

// unescapeOctal undoes the kernel's \ooo escapes (space, tab, newline,
// backslash) in mountinfo paths.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// resolve returns dir with symbolic links resolved; ok is false if dir
// does not exist (then nothing can be mounted on or below it).
func resolve(dir string) (string, bool, error) {
	real, err := filepath.EvalSymlinks(dir)
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("resolve %s: %w", dir, err)
	}
	return real, true, nil
}

// isTmpfs reports whether the top mount on dir is a tmpfs: dir is a
// mount's root (isMountPoint: two system calls rather than a read of the
// mount table, which grows with the pods, and every sync of every pod
// asks) and statfs sees a tmpfs there.
func isTmpfs(dir string) (bool, error) {
	mounted, err := isMountPoint(dir)
	if err != nil || !mounted {
		return false, err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return false, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return st.Type == unix.TMPFS_MAGIC, nil
}

// mountsBelow returns the mount points on or below dir (already resolved),
// deepest first.
func mountsBelow(real string, mounts []mountEntry) []string {
	var pts []string
	for _, m := range mounts {
		if m.Point == real || strings.HasPrefix(m.Point, real+"/") {
			pts = append(pts, m.Point)
		}
	}
	slices.Reverse(pts) // the kernel lists children after their parents
	return pts
}

// unmountAllBelow unmounts everything mounted on or below dir, stacked
// mounts included. Not mounted and missing count as success.
func unmountAllBelow(dir string) error {
	real, ok, err := resolve(dir)
	if err != nil || !ok {
		return err
	}
	for range 16 { // bounded: stacked mounts come off one layer per round
		mounts, err := readMounts()
		if err != nil {
			return err
		}
		pts := mountsBelow(real, mounts)
		if len(pts) == 0 {
			return nil
		}
		for _, pt := range pts {
			err := unix.Unmount(pt, 0)
			if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				return fmt.Errorf("unmount %s: %w", pt, err)
			}
		}
	}
	return fmt.Errorf("unmount below %s: mounts remain after repeated unmounts", dir)
}

// isMountPoint reports whether dir is the root of a mount (bind mounts
// included); a missing dir is not.
func isMountPoint(dir string) (bool, error) {
	real, ok, err := resolve(dir)
	if err != nil || !ok {
		return false, err
	}
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, real, unix.AT_SYMLINK_NOFOLLOW, 0, &stx); err != nil {
		return false, fmt.Errorf("statx %s: %w", real, err)
	}
	if stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 {
		return stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0, nil
	}
	mounts, err := readMounts() // kernels before 5.8
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(mounts, func(m mountEntry) bool { return m.Point == real }), nil
}
