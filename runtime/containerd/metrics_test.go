package containerd_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/containerd"
	"github.com/nodelet/nodelet/test/testkit"
)

// TestContainerMetrics runs a sandbox and a busybox container that burns
// some CPU and holds some memory, and reads their usage; a stopped
// container drops out of the list.
func TestContainerMetrics(t *testing.T) {
	f := newFixture(t, false)
	ctx := context.Background()
	// Spin a little, then dd fills a 4 MiB buffer and blocks writing it
	// to a pipe nobody reads: CPU time and working set are well above zero.
	script := `i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; dd if=/dev/zero bs=4M count=1 2>/dev/null | sleep 1000`
	pod := testPod("metrics",
		corev1.Container{Name: "busy", Image: "busybox:1.36", Command: []string{"sh", "-c", script}},
		corev1.Container{Name: "done", Image: "busybox:1.36", Command: []string{"sleep", "1000"}},
	)
	sb, err := f.rt.RunSandbox(ctx, pod, runtime.SandboxConfig{Image: f.pause, NetNSPath: f.netns})
	if err != nil {
		t.Fatal(err)
	}
	busy := f.runContainer(t, pod, sb, 0)
	done := f.runContainer(t, pod, sb, 1)
	if err := f.rt.StopContainer(ctx, done, 0); err != nil {
		t.Fatal(err)
	}

	var got map[string]runtime.ContainerMetrics
	testkit.Eventually(t, 20*time.Second, "the busy container to use 20ms of CPU and 4 MiB", func() (bool, error) {
		got = metricsByID(t, f.rt)
		if b, ok := got[busy]; ok && b.CPUUsageNanoseconds > 20*uint64(time.Millisecond) && b.WorkingSetBytes > 4<<20 {
			return true, nil
		}
		return false, fmt.Errorf("busy container metrics: %+v", got[busy])
	})
	if len(got) != 2 {
		t.Errorf("want the sandbox and the busy container, got %d: %+v", len(got), got)
	}
	b := got[busy]
	if b.Name != "busy" || b.Sandbox || b.PodUID != "uid-metrics" || b.PodName != "metrics" || b.PodNamespace != "default" {
		t.Errorf("busy identity = %+v", b)
	}
	checkUsage(t, "busy", b)
	s, ok := got[sb]
	if !ok || !s.Sandbox || s.Name != "" || s.PodUID != "uid-metrics" {
		t.Fatalf("sandbox metrics = %+v (present %v)", s, ok)
	}
	checkUsage(t, "sandbox", s)
	if _, ok := got[done]; ok {
		t.Errorf("stopped container %s listed", done)
	}

	if err := f.rt.RemoveSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if got := metricsByID(t, f.rt); len(got) != 0 {
		t.Errorf("metrics after removal: %+v", got)
	}
	assertNothingLeft(t, f.rt)
}

func metricsByID(t *testing.T, rt *containerd.Runtime) map[string]runtime.ContainerMetrics {
	t.Helper()
	list, err := rt.ContainerMetrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]runtime.ContainerMetrics{}
	for _, m := range list {
		if _, dup := out[m.ID]; dup {
			t.Errorf("container %s listed twice", m.ID)
		}
		out[m.ID] = m
	}
	return out
}

// checkUsage checks what any running container shows: CPU and memory
// above zero, a working set within usage, sensible times.
func checkUsage(t *testing.T, what string, m runtime.ContainerMetrics) {
	t.Helper()
	if m.CPUUsageNanoseconds == 0 || m.MemoryUsageBytes == 0 || m.WorkingSetBytes == 0 || m.PageFaults == 0 {
		t.Errorf("%s: zero usage: %+v", what, m)
	}
	if m.WorkingSetBytes > m.MemoryUsageBytes {
		t.Errorf("%s: working set %d > usage %d", what, m.WorkingSetBytes, m.MemoryUsageBytes)
	}
	now := time.Now()
	if m.StartedAt.IsZero() || m.StartedAt.After(now) || now.Sub(m.StartedAt) > time.Minute {
		t.Errorf("%s: started at %v", what, m.StartedAt)
	}
	if m.Timestamp.Before(m.StartedAt) || m.Timestamp.After(now) {
		t.Errorf("%s: timestamp %v (started %v, now %v)", what, m.Timestamp, m.StartedAt, now)
	}
}
