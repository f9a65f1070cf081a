package volumes

import (
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
