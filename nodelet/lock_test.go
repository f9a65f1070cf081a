package nodelet

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestInstanceLocks(t *testing.T) {
	dir := t.TempDir()
	cfg := func(root, sock, ns string) Config {
		return Config{NodeName: "n1", RootDir: filepath.Join(dir, root), LockFile: filepath.Join(dir, root, "nodelet.lock"),
			ContainerdAddress: filepath.Join(dir, sock), ContainerdNamespace: ns}
	}
	first, err := lockInstance(cfg("a", "c.sock", "nodelet"))
	if err != nil {
		t.Fatalf("first lock: %v", err)
	}
	for name, c := range map[string]Config{
		"same root dir":             cfg("a", "other.sock", "other"),
		"same containerd namespace": cfg("b", "c.sock", "nodelet"),
	} {
		_, err := lockInstance(c)
		if !errors.Is(err, ErrLocked) {
			t.Errorf("%s: %v, want ErrLocked", name, err)
			continue
		}
		// The error names the holder, so the operator knows which to stop.
		if msg := err.Error(); !strings.Contains(msg, "pid="+strconv.Itoa(os.Getpid())) || !strings.Contains(msg, "node=n1") {
			t.Errorf("%s: error does not name the holder: %s", name, msg)
		}
	}
	// A refused nodelet leaves the holder's record intact.
	if data, _ := os.ReadFile(filepath.Join(dir, "a", "nodelet.lock")); !strings.Contains(string(data), "root-dir="+filepath.Join(dir, "a")) {
		t.Errorf("lock file rewritten by the refused nodelet: %q", data)
	}
	other, err := lockInstance(cfg("b", "c.sock", "other-namespace"))
	if err != nil {
		t.Fatalf("another root dir and namespace: %v", err)
	}
	other.Release()
	first.Release()
	again, err := lockInstance(cfg("a", "c.sock", "nodelet"))
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	again.Release()
}
