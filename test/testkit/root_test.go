package testkit

import (
	"testing"
)

func TestRequireRoot(t *testing.T) {
	defer func(old func() int) { geteuid = old }(geteuid)
	geteuid = func() int { return 0 }
	if msg := run(func(tb testing.TB) { RequireRoot(tb, "mounts tmpfs") }); msg != "" {
		t.Errorf("as root: Fatalf(%q)", msg)
	}
	geteuid = func() int { return 1000 }
	msg := run(func(tb testing.TB) { RequireRoot(tb, "mounts tmpfs") })
	if want := "TestFake needs root (mounts tmpfs); running as uid 1000: run the tests as root"; msg != want {
		t.Errorf("as uid 1000: Fatalf(%q), want %q", msg, want)
	}
}
