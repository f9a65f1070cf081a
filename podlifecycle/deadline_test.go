package podlifecycle

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/runtime"
)

func TestActiveDeadline(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	start := metav1.NewTime(t0)
	ten := int64(10)
	with := &corev1.Pod{Spec: corev1.PodSpec{ActiveDeadlineSeconds: &ten}}
	for _, tt := range []struct {
		name     string
		pod      *corev1.Pod
		start    *metav1.Time
		now      time.Time
		exceeded bool
		left     time.Duration
	}{
		{"no deadline", &corev1.Pod{}, &start, t0.Add(time.Hour), false, 0},
		{"not started", with, nil, t0.Add(time.Hour), false, 0},
		{"before", with, &start, t0.Add(4 * time.Second), false, 6 * time.Second},
		{"at the deadline", with, &start, t0.Add(10 * time.Second), true, 0},
		{"after", with, &start, t0.Add(time.Minute), true, 0},
	} {
		exceeded, left := activeDeadline(tt.pod, tt.start, tt.now)
		if exceeded != tt.exceeded || left != tt.left {
			t.Errorf("%s: (%v, %v), want (%v, %v)", tt.name, exceeded, left, tt.exceeded, tt.left)
		}
	}
}

// TestSyncPodPastDeadline: a running pod is synced again when its deadline
// passes, then fails with upstream's reason, message and event, starts
// nothing more, and keeps that status through its termination.
func TestSyncPodPastDeadline(t *testing.T) {
	f := newFakeSyncer(t)
	ctx := context.Background()
	pod := busyboxPod()
	pod.Spec.InitContainers = nil
	deadline := int64(30)
	pod.Spec.ActiveDeadlineSeconds = &deadline
	started := metav1.NewTime(f.now.Add(-20 * time.Second))
	pod.Status.StartTime = &started
	f.rt.sandboxes = []runtime.SandboxStatus{{ID: "sb1", State: runtime.StateRunning, IP: "10.0.0.5", NetNSPath: "/netns/n1"}}
	f.rt.containers = []runtime.ContainerStatus{{ID: "c1", Name: "app", SandboxID: "sb1", State: runtime.StateRunning}}

	res, err := f.s.SyncPod(ctx, pod)
	if err != nil || res.Finished {
		t.Fatalf("sync before the deadline: %+v, %v", res, err)
	}
	if res.ResyncAfter <= 0 || res.ResyncAfter > 10*time.Second {
		t.Errorf("resync after %v, want the 10 s left", res.ResyncAfter)
	}
	if st := f.status.last(); st.Phase != corev1.PodRunning {
		t.Fatalf("phase before the deadline: %s", st.Phase)
	}

	f.now = f.now.Add(11 * time.Second)
	f.rt.calls = nil
	res, err = f.s.SyncPod(ctx, pod)
	if err != nil || !res.Finished {
		t.Fatalf("sync past the deadline: %+v, %v; want Finished", res, err)
	}
	st := f.status.last()
	if st.Phase != corev1.PodFailed || st.Reason != ReasonDeadlineExceeded || st.Message != MessageDeadlineExceeded {
		t.Errorf("status past the deadline: %s %q %q", st.Phase, st.Reason, st.Message)
	}
	if len(f.rt.calls) != 0 {
		t.Errorf("runtime calls past the deadline: %v", f.rt.calls)
	}
	want := "Normal DeadlineExceeded " + MessageDeadlineExceeded
	if !slices.Contains(f.events.events, want) {
		t.Errorf("events %q, want %q", f.events.events, want)
	}

	if err := f.s.SyncTerminatingPod(ctx, pod, 1); err != nil {
		t.Fatal(err)
	}
	if st := f.status.last(); st.Phase != corev1.PodFailed || st.Reason != ReasonDeadlineExceeded {
		t.Errorf("status after termination: %s %q", st.Phase, st.Reason)
	}
}
