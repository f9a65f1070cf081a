package testkit

import (
	"os"
	"testing"
)

// geteuid is replaced by this package's own tests.
var geteuid = os.Geteuid

// RequireRoot fails the test at once unless it runs as root; why names
// what needs root ("mounts tmpfs", "creates network namespaces") so the
// failure says what to do. Root-only tests fail rather than skip: CI runs
// them as root, and a skip would count as a pass.
func RequireRoot(t testing.TB, why string) {
	t.Helper()
	if uid := geteuid(); uid != 0 {
		t.Fatalf("%s needs root (%s); running as uid %d: run the tests as root", t.Name(), why, uid)
	}
}
