package containerd_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/test/testkit"
)

// TestOOMKilled runs a memory hog under a 16 MiB limit: the kernel's OOM
// killer ends it, and its status says OOMKilled with exit code 137, also
// for a runtime started afterwards.
func TestOOMKilled(t *testing.T) {
	f := newFixture(t, true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	limits := corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("16Mi")}
	pod := testPod("hog",
		// busybox tail keeps a line without newline in memory: all of it.
		corev1.Container{Name: "hog", Image: "busybox:1.36", Command: []string{"sh", "-c", "head -c 500000000 /dev/zero | tail"},
			Resources: corev1.ResourceRequirements{Limits: limits}},
		corev1.Container{Name: "fine", Image: "busybox:1.36", Command: []string{"sh", "-c", "exit 1"}},
	)
	sb, err := f.rt.RunSandbox(ctx, pod, runtime.SandboxConfig{Image: f.pause, NetNSPath: f.netns})
	if err != nil {
		t.Fatal(err)
	}
	events := f.rt.Events(ctx)
	time.Sleep(100 * time.Millisecond) // the subscription is set up
	hog := f.runContainer(t, pod, sb, 0)
	waitExit(t, events, hog)
	fine := f.runContainer(t, pod, sb, 1)
	waitExit(t, events, fine)
	var st *runtime.ContainerStatus
	testkit.Eventually(t, 10*time.Second, "the hog to be reported OOMKilled", func() (bool, error) {
		st = podStatus(t, f.rt, "uid-hog").LatestContainer("hog")
		if st != nil && st.Reason == "OOMKilled" {
			return true, nil
		}
		return false, fmt.Errorf("hog status = %+v, want exited OOMKilled 137", st)
	})
	if st == nil || st.State != runtime.StateExited || st.Reason != "OOMKilled" || st.ExitCode != 137 {
		t.Fatalf("hog status = %+v, want exited OOMKilled 137", st)
	}
	if c := podStatus(t, newRuntime(t, f.cfg), "uid-hog").LatestContainer("hog"); c == nil || c.Reason != "OOMKilled" {
		t.Errorf("after a restart of the runtime: %+v", c)
	}
	if c := podStatus(t, f.rt, "uid-hog").LatestContainer("fine"); c == nil || c.Reason != "Error" || c.ExitCode != 1 {
		t.Errorf("a plain failure: %+v", c)
	}
	if err := f.rt.RemoveSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
}
