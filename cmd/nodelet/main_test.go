package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nodelet/nodelet/hosttools"
)

// TestBinary builds the real nodelet and runs the paths that end before
// the agent starts: --version, and a --config the nodelet refuses.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "nodelet")
	if out, err := hosttools.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil || !regexp.MustCompile(`^nodelet v\d+\.\d+\.\d+\+nodelet \(commit \S+\)\n$`).Match(out) {
		t.Errorf("nodelet --version: %v, %q", err, out)
	}
	for field, body := range map[string]string{
		`unknown field "maxPod"`: "maxPod: 3\n",
		"field maxPods":          "maxPods: -3\n",
	} {
		out, err = exec.Command(bin, "--kubeconfig", "/nonexistent", "--config", writeConfig(t, body)).CombinedOutput()
		if code := exitCode(err); code == 0 || !strings.Contains(string(out), field) {
			t.Errorf("nodelet --config with %q: exit %d, output %q; want non-zero naming %s", body, code, out, field)
		}
	}
	// Discovery refuses a malformed token before dialing anything.
	out, err = exec.Command(bin, "bootstrap-kubeconfig", "--server", "127.0.0.1:1", "--token", "not-a-token",
		"--discovery-token-unsafe-skip-ca-verification", "--out", filepath.Join(t.TempDir(), "boot.conf")).CombinedOutput()
	if code := exitCode(err); code == 0 || !strings.Contains(string(out), "not a bootstrap token") {
		t.Errorf("nodelet bootstrap-kubeconfig with a bad token: exit %d, output %q", code, out)
	}
}

func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
