package main

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/nodelet/nodelet/hosttools"
)

// TestExitsOnSIGTERM builds and runs the real program: it must keep running
// until SIGTERM, then exit 0.
func TestExitsOnSIGTERM(t *testing.T) {
	bin := t.TempDir() + "/pause"
	build := hosttools.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		cmd := exec.Command(bin)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			t.Fatalf("pause exited before any signal: %v", err)
		case <-time.After(300 * time.Millisecond):
		}
		cmd.Process.Signal(sig)
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("after %v: %v, want exit 0", sig, err)
			}
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("pause ignored %v", sig)
		}
	}
}

func TestReapsChildren(t *testing.T) {
	// reap must return at once when there is nothing to collect.
	done := make(chan struct{})
	go func() { reap(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("reap blocked with no children")
	}
}
