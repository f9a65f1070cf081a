package volumes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/nodelet/nodelet/test/testkit"
)

// A directory on a private mount becomes a shared mount of its own, once;
// one on a shared mount is left alone.
func TestEnsureShared(t *testing.T) {
	testkit.RequireRoot(t, "bind-mounts a directory")
	dir := t.TempDir()
	shared, _, err := sharedMount(dir)
	if err != nil {
		t.Fatal(err)
	}
	if shared {
		if err := ensureShared(dir); err != nil {
			t.Fatal(err)
		}
		if mounts, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(dir)); err != nil || len(mounts) != 0 {
			t.Fatalf("a directory on a shared mount got mounts %+v, %v", mounts, err)
		}
		return
	}
	if err := ensureShared(dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("clean-up: %v", err)
		}
	})
	if err := ensureShared(dir); err != nil {
		t.Fatal(err)
	}
	mounts, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(dir))
	if err != nil || len(mounts) != 1 || !strings.Contains(mounts[0].Optional, "shared:") {
		t.Fatalf("mounts at %s: %+v, %v; want one shared", dir, mounts, err)
	}
}

// A volume mounted below the directory before it is made shared (another
// pod's, set up earlier) stays mounted once, visible at its path, so
// that its teardown's unmount by path leaves nothing behind.
func TestEnsureSharedKeepsMountsBelow(t *testing.T) {
	testkit.RequireRoot(t, "bind-mounts a directory")
	dir := t.TempDir()
	if shared, _, err := sharedMount(dir); err != nil || shared {
		t.Skipf("%s is on a shared mount (%v): nothing is bound", dir, err)
	}
	vol := filepath.Join(dir, "pod", "vol")
	if err := os.MkdirAll(vol, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", vol, "tmpfs", 0, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		unix.Unmount(vol, unix.MNT_DETACH)
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("clean-up: %v", err)
		}
		unix.Unmount(vol, unix.MNT_DETACH) // hidden under the bind before the fix
	})
	if err := os.WriteFile(filepath.Join(vol, "data"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ensureShared(dir); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(vol, "data")); err != nil || string(b) != "kept" {
		t.Fatalf("the volume's file after the bind: %q, %v", b, err)
	}
	// Every mount at vol (SingleEntryFilter stops at the first).
	at := func(m *mountinfo.Info) (bool, bool) { return m.Mountpoint != vol, false }
	mounts, err := mountinfo.GetMounts(at)
	if err != nil || len(mounts) != 1 {
		t.Fatalf("mounts at %s: %+v, %v; want one", vol, mounts, err)
	}
	if err := unix.Unmount(vol, 0); err != nil {
		t.Fatal(err)
	}
	if mounts, err := mountinfo.GetMounts(at); err != nil || len(mounts) != 0 {
		t.Fatalf("mounts at %s after its unmount: %+v, %v; want none", vol, mounts, err)
	}
}
