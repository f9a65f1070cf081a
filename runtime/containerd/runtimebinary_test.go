package containerd_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/hosttools"
	"github.com/nodelet/nodelet/runtime"
)

// With RuntimeBinary the shim runs that OCI runtime instead of runc: here
// a wrapper that records its arguments and runs runc, so the test sees the
// shim call it for the sandbox and the container. (crun, the obvious
// other runtime, refuses this machine's hybrid cgroup layout.)
func TestRuntimeBinary(t *testing.T) {
	f := newFixture(t, false)
	runc, err := hosttools.Path("runc")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	wrapper := filepath.Join(dir, "oci-runtime")
	script := "#!/bin/sh\necho \"$*\" >> " + calls + "\nexec " + runc + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := f.cfg
	cfg.RuntimeBinary = wrapper
	rt := newRuntime(t, cfg)
	ctx := context.Background()
	pod := testPod("wrapped", corev1.Container{Name: "c", Image: "busybox:1.36", Command: []string{"sleep", "60"}})
	sb, err := rt.RunSandbox(ctx, pod, runtime.SandboxConfig{Image: f.pause, NetNSPath: f.netns})
	if err != nil {
		t.Fatal(err)
	}
	id, err := rt.CreateContainer(ctx, pod, &pod.Spec.Containers[0], runtime.ContainerConfig{SandboxID: sb, Image: f.busybox, ImageName: "busybox:1.36"})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(calls)
	if err != nil {
		t.Fatalf("the shim never ran the runtime binary: %v", err)
	}
	for _, want := range []string{"create", sb, id} {
		if !strings.Contains(string(out), want) {
			t.Errorf("runtime binary calls lack %q:\n%s", want, out)
		}
	}
	for _, step := range []func() error{
		func() error { return rt.StopContainer(ctx, id, 0) },
		func() error { return rt.RemoveContainer(ctx, id) },
		func() error { return rt.StopSandbox(ctx, sb) },
		func() error { return rt.RemoveSandbox(ctx, sb) },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	assertNothingLeft(t, rt)
}
