package network

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// createNetNS makes a new network namespace and pins it at path with a bind
// mount, as `ip netns add` does, so that it outlives every process in it.
func createNetNS(path string) (retErr error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create netns dir for %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return fmt.Errorf("create netns mount point %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("create netns mount point %s: %w", path, err)
	}
	defer func() {
		if retErr != nil {
			_ = os.Remove(path)
		}
	}()
	done := make(chan error, 1)
	go func() {
		// The thread is never unlocked: it ends with this goroutine, so no
		// other goroutine ever runs in the namespace it moved to.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("unshare netns for %s: %w", path, err)
			return
		}
		if err := unix.Mount("/proc/thread-self/ns/net", path, "none", unix.MS_BIND, ""); err != nil {
			done <- fmt.Errorf("bind mount netns at %s: %w", path, err)
			return
		}
		done <- nil
	}()
	return <-done
}

// removeNetNS unmounts and removes a netns made by createNetNS. A path
// that is missing, or no longer a mount, is fine.
func removeNetNS(path string) error {
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil &&
		!errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount netns %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove netns %s: %w", path, err)
	}
	return nil
}

// isNetNS reports whether path is a live network namespace (an nsfs mount),
// as opposed to missing or a mount point left without its mount.
func isNetNS(path string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return false
	}
	return st.Type == unix.NSFS_MAGIC || st.Type == unix.PROC_SUPER_MAGIC
}

// setLoopbackUp brings up lo in the netns at path; CNI leaves it down.
func setLoopbackUp(path string) error {
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("open netns %s: %w", path, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("netlink in netns %s: %w", path, err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("find lo in netns %s: %w", path, err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		return fmt.Errorf("set lo up in netns %s: %w", path, err)
	}
	return nil
}
