package testkit

import (
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// TestInNewNetns checks f runs in another namespace, with lo up, and the
// thread is back in the test's afterwards.
func TestInNewNetns(t *testing.T) {
	RequireRoot(t, "creates a network namespace")
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	host, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	InNewNetns(t, func() {
		inside, err := netns.Get()
		if err != nil {
			t.Fatal(err)
		}
		defer inside.Close()
		if inside.Equal(host) {
			t.Fatal("f runs in the test's namespace")
		}
		lo, err := netlink.LinkByName("lo")
		if err != nil || lo.Attrs().Flags&unix.IFF_UP == 0 {
			t.Errorf("lo in the new namespace: %v, %+v", err, lo)
		}
	})
	after, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	if !after.Equal(host) {
		t.Error("the thread is not back in the test's namespace")
	}
}

// TestInNodeNetns checks the body runs in a child in another namespace
// and the mounts it leaves under base are gone once the parent's cleanup
// ran.
func TestInNodeNetns(t *testing.T) {
	RequireRoot(t, "creates a network namespace")
	t.Cleanup(func() { // runs after InNodeNetns's own
		if os.Getenv(nodeChildEnv) != "" {
			return // the child's mounts stay until the parent's cleanup
		}
		data, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), "/"+t.Name()) { // t.TempDir's paths hold the name
			t.Errorf("mounts left under the test's directory:\n%s", data)
		}
	})
	InNodeNetns(t, func(t *testing.T, base string) {
		self, err := os.Readlink("/proc/self/ns/net")
		if err != nil {
			t.Fatal(err)
		}
		parent, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", os.Getppid()))
		if err != nil {
			t.Fatal(err)
		}
		if self == parent {
			t.Fatalf("the child runs in its parent's namespace %s", parent)
		}
		// Mounts the child leaves behind, one inside the other, as a
		// failed pod network test leaves pod netns files.
		dir := filepath.Join(base, "outer")
		for _, d := range []string{dir, filepath.Join(dir, "inner")} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := unix.Mount("tmpfs", d, "tmpfs", 0, ""); err != nil {
				t.Fatal(err)
			}
		}
	})
}
