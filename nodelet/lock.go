package nodelet

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ErrLocked means another nodelet manages the same root directory or the
// same containerd namespace. Two nodelets on one set of pods would fight
// over them (duplicate sandboxes, each killing the other's containers).
var ErrLocked = errors.New("another nodelet is running")

// instanceLocks are the exclusive locks a nodelet holds while it runs: its
// root directory's lock file (as upstream's --lock-file) and one for its
// containerd socket and namespace, next to the socket (so it lives as long
// as the socket's directory, normally the tmpfs /run/containerd). They are
// flock(2) locks, so a crashed nodelet's go with its process and never
// need cleaning; the files say who holds them, for the error the next one
// prints.
type instanceLocks struct{ files []*os.File }

// lockInstance takes both locks or none. Nothing of the node is touched
// before it returns: a refused nodelet disturbs nothing.
func lockInstance(cfg Config) (*instanceLocks, error) {
	l := &instanceLocks{}
	owner := fmt.Sprintf("pid=%d node=%s root-dir=%s containerd=%s namespace=%s started=%s\n",
		os.Getpid(), cfg.NodeName, cfg.RootDir, cfg.ContainerdAddress, cfg.ContainerdNamespace,
		time.Now().UTC().Format(time.RFC3339))
	for _, lock := range []struct{ path, what string }{
		{cfg.LockFile, "root directory " + cfg.RootDir},
		{containerdLockPath(cfg.ContainerdAddress, cfg.ContainerdNamespace),
			fmt.Sprintf("containerd namespace %q at %s", cfg.ContainerdNamespace, cfg.ContainerdAddress)},
	} {
		f, err := takeLock(lock.path, owner)
		if err != nil {
			l.Release()
			return nil, fmt.Errorf("lock %s: %w", lock.what, err)
		}
		l.files = append(l.files, f)
	}
	return l, nil
}

// containerdLockPath names the lock of one containerd namespace: beside
// the socket (resolved), SOCKET.nodelet-NAMESPACE.lock. containerd's own
// rules keep namespace names to letters, digits, '.', '-' and '_'.
func containerdLockPath(address, namespace string) string {
	if p, err := filepath.EvalSymlinks(address); err == nil {
		address = p
	}
	return address + ".nodelet-" + namespace + ".lock"
}

// takeLock opens path and flocks it without waiting. On contention the
// error wraps ErrLocked and quotes the holder's line.
func takeLock(path, owner string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("lock file %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock file %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s holds %s", ErrLocked, strings.TrimSpace(string(holder)), path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(owner), 0)
	}
	return f, nil
}

// Release drops the locks (the process's exit does too).
func (l *instanceLocks) Release() {
	for _, f := range l.files {
		f.Close()
	}
	l.files = nil
}
