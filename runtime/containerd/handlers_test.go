package containerd_test

import (
	"context"
	"errors"
	"testing"

	runcoptions "github.com/containerd/containerd/api/types/runc/options"
	ctrdclient "github.com/containerd/containerd/v2/client"
	"github.com/containerd/typeurl/v2"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/hosttools"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/containerd"
)

// A RuntimeClass handler runs the pod's sandbox and containers with its
// OCI runtime: the shim of each gets that BinaryName, and they run. The
// second handler maps to the same runc as the default (crun, the obvious
// other runtime, refuses this machine's hybrid cgroup layout), so what is
// checked is the mapping the shim receives. A handler the node has none
// for creates nothing.
func TestRuntimeHandlers(t *testing.T) {
	f := newFixture(t, false)
	runc, err := hosttools.Path("runc")
	if err != nil {
		t.Fatal(err)
	}
	cfg := f.cfg
	cfg.RuntimeHandlers = map[string]string{"runc-alt": runc}
	rt := newRuntime(t, cfg)
	ctx := context.Background()

	pod := testPod("alt", corev1.Container{Name: "c", Image: "busybox:1.36", Command: []string{"sleep", "60"}})
	sb, err := rt.RunSandbox(ctx, pod, runtime.SandboxConfig{Image: f.pause, NetNSPath: f.netns, RuntimeHandler: "runc-alt"})
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
	for what, cid := range map[string]string{"sandbox": sb, "container": id} {
		if got := shimBinary(t, rt, cid); got != runc {
			t.Errorf("%s runs with BinaryName %q, want %q", what, got, runc)
		}
		if st := taskStatus(t, rt, cid); st != ctrdclient.Running {
			t.Errorf("%s task is %s, want running", what, st)
		}
	}

	plain := testPod("plain")
	sb2, err := rt.RunSandbox(ctx, plain, runtime.SandboxConfig{Image: f.pause, NetNSPath: f.netns})
	if err != nil {
		t.Fatal(err)
	}
	if got := shimBinary(t, rt, sb2); got != "" {
		t.Errorf("a pod without a handler runs with BinaryName %q, want the shim's default", got)
	}

	_, err = rt.RunSandbox(ctx, testPod("lost"), runtime.SandboxConfig{Image: f.pause, NetNSPath: f.netns, RuntimeHandler: "kata"})
	var unknown *runtime.UnknownRuntimeHandlerError
	if !errors.As(err, &unknown) || unknown.Handler != "kata" {
		t.Fatalf("unknown handler: %v, want UnknownRuntimeHandlerError", err)
	}

	for _, step := range []func() error{
		func() error { return rt.StopContainer(ctx, id, 0) },
		func() error { return rt.RemoveContainer(ctx, id) },
		func() error { return rt.StopSandbox(ctx, sb) },
		func() error { return rt.RemoveSandbox(ctx, sb) },
		func() error { return rt.StopSandbox(ctx, sb2) },
		func() error { return rt.RemoveSandbox(ctx, sb2) },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	assertNothingLeft(t, rt)
}

// shimBinary is the BinaryName in the runc shim options containerd holds
// for container id ("" without options).
func shimBinary(t *testing.T, rt *containerd.Runtime, id string) string {
	t.Helper()
	ctx := rt.NamespaceForTest(context.Background())
	cont, err := rt.ClientForTest().LoadContainer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	info, err := cont.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Runtime.Options == nil {
		return ""
	}
	v, err := typeurl.UnmarshalAny(info.Runtime.Options)
	if err != nil {
		t.Fatalf("runtime options of %s: %v", id, err)
	}
	opts, ok := v.(*runcoptions.Options)
	if !ok {
		t.Fatalf("runtime options of %s are %T", id, v)
	}
	return opts.BinaryName
}

func taskStatus(t *testing.T, rt *containerd.Runtime, id string) ctrdclient.ProcessStatus {
	t.Helper()
	ctx := rt.NamespaceForTest(context.Background())
	cont, err := rt.ClientForTest().LoadContainer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	task, err := cont.Task(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := task.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st.Status
}
