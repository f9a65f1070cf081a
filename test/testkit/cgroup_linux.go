package testkit

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	libcgroups "github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"
)

// CgroupRoot makes a unique cgroup root name (/<prefix>-<random>) for a
// test's cgroup manager and removes it from every mounted hierarchy at
// cleanup, where a leftover fails the test. Its caller needs root.
func CgroupRoot(t testing.TB, prefix string) string {
	t.Helper()
	b := make([]byte, 6)
	rand.Read(b)
	root := "/" + prefix + "-" + hex.EncodeToString(b)
	hierarchies := CgroupHierarchies(t)
	t.Cleanup(func() {
		for _, h := range hierarchies {
			if err := libcgroups.RemovePath(filepath.Join(h, root)); err != nil {
				t.Errorf("cleanup: remove %s: %v", filepath.Join(h, root), err)
			}
		}
	})
	return root
}

// CgroupHierarchies are the mounted cgroup hierarchies: /sys/fs/cgroup
// itself on the unified hierarchy (v2), else each v1 controller's mount.
func CgroupHierarchies(t testing.TB) []string {
	t.Helper()
	var st unix.Statfs_t
	if unix.Statfs("/sys/fs/cgroup", &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		return []string{"/sys/fs/cgroup"}
	}
	entries, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		t.Fatalf("read /sys/fs/cgroup: %v", err)
	}
	var out []string
	for _, e := range entries {
		p := filepath.Join("/sys/fs/cgroup", e.Name())
		if e.Type()&os.ModeSymlink != 0 || unix.Statfs(p, &st) != nil {
			continue
		}
		if st.Type == unix.CGROUP_SUPER_MAGIC || st.Type == unix.CGROUP2_SUPER_MAGIC {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		t.Fatal("no cgroup hierarchy mounted under /sys/fs/cgroup")
	}
	return out
}
