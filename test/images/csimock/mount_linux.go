package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// bindMount mounts src onto target (made if missing), read-only if ro;
// a target that already is a mount point is left as it is (CSI calls are
// retried and must be idempotent).
func bindMount(src, target string, ro bool) error {
	if err := os.MkdirAll(target, 0o750); err != nil {
		return fmt.Errorf("make %s: %w", target, err)
	}
	if mounted, err := isMountPoint(target); err != nil || mounted {
		return err
	}
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind mount %s on %s: %w", src, target, err)
	}
	if ro {
		if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			unix.Unmount(target, unix.MNT_DETACH)
			return fmt.Errorf("remount %s read-only: %w", target, err)
		}
	}
	return nil
}

// unmount unmounts target if it is a mount point; a missing target is
// already unmounted.
func unmount(target string) error {
	if target == "" {
		return errors.New("no target path")
	}
	mounted, err := isMountPoint(target)
	if err != nil || !mounted {
		return err
	}
	if err := unix.Unmount(target, 0); err != nil {
		return fmt.Errorf("unmount %s: %w", target, err)
	}
	return nil
}

// isMountPoint tells whether path is the mount point of a line of
// /proc/self/mountinfo.
func isMountPoint(path string) (bool, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return false, err
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && unescapeOctal(fields[4]) == abs {
			return true, nil
		}
	}
	return false, sc.Err()
}

// unescapeOctal undoes mountinfo's \ooo escapes (space, tab, newline, \).
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%3o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
