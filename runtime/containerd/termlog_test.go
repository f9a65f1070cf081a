package containerd

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/nodelet/nodelet/test/testkit"
)

// TestOwnTerminationLog: the termination-log file goes to the container's
// user and group, so a non-root container writes its 0660 file.
func TestOwnTerminationLog(t *testing.T) {
	testkit.RequireRoot(t, "chowns a file to another user")
	p := filepath.Join(t.TempDir(), "c-0")
	if err := os.WriteFile(p, nil, 0o660); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o660); err != nil { // whatever the umask
		t.Fatal(err)
	}
	spec := &specs.Spec{Process: &specs.Process{User: specs.User{UID: 1234, GID: 5678}}}
	if err := ownTerminationLog(p, spec); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 1234 || st.Gid != 5678 || fi.Mode().Perm() != 0o660 {
		t.Fatalf("owner %d:%d mode %v, want 1234:5678 0660", st.Uid, st.Gid, fi.Mode())
	}
	if err := ownTerminationLog("", spec); err != nil {
		t.Fatalf("no termination log: %v", err)
	}
}
