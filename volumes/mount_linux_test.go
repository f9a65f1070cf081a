package volumes

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nodelet/nodelet/test/testkit"
)

// isTmpfs is true only for the root of a tmpfs mount: not for a plain
// directory, not for a directory inside a tmpfs, not once unmounted.
func TestIsTmpfs(t *testing.T) {
	testkit.RequireRoot(t, "mounts a tmpfs")
	dir := filepath.Join(t.TempDir(), "vol")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	check := func(what, path string, want bool) {
		t.Helper()
		if got, err := isTmpfs(path); err != nil || got != want {
			t.Errorf("%s: isTmpfs = %v, %v; want %v", what, got, err, want)
		}
	}
	check("plain directory", dir, false)
	check("missing directory", filepath.Join(dir, "missing"), false)
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, ""); err != nil {
		t.Fatal(err)
	}
	mounted := true
	t.Cleanup(func() {
		if mounted {
			unix.Unmount(dir, unix.MNT_DETACH)
		}
	})
	check("tmpfs root", dir, true)
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	check("directory inside the tmpfs", sub, false)
	if err := unix.Unmount(dir, 0); err != nil {
		t.Fatal(err)
	}
	mounted = false
	check("after unmount", dir, false)
}
