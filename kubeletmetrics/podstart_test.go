package kubeletmetrics

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var t0 = time.Unix(1700000000, 0)

// fakeTracker is a tracker on a settable clock that records what it
// observes.
type fakeTracker struct {
	*PodStartTracker
	now      time.Time
	observed [][2]time.Duration // sli, total
}

func newFakeTracker() *fakeTracker {
	f := &fakeTracker{now: t0}
	f.PodStartTracker = newPodStartTracker(func(sli, total time.Duration) {
		f.observed = append(f.observed, [2]time.Duration{sli, total})
	}, func() time.Time { return f.now })
	return f
}

func (f *fakeTracker) at(d time.Duration) *fakeTracker { f.now = t0.Add(d); return f }

func pendingPod(uid types.UID) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid, CreationTimestamp: metav1.NewTime(t0)},
		Status: corev1.PodStatus{Phase: corev1.PodPending}}
}

// withStatus is the pod once the node wrote its status: started, and its
// containers running (all, or only the first when allRunning is false).
func withStatus(p *corev1.Pod, allRunning bool) *corev1.Pod {
	p = p.DeepCopy()
	p.Status.Phase = corev1.PodRunning
	p.Status.StartTime = &metav1.Time{Time: t0.Add(time.Second)}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(t0.Add(2 * time.Second))}}
	waiting := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	second := running
	if !allRunning {
		second = waiting
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "a", State: running}, {Name: "b", State: second}}
	return p
}

func TestPodStartSLI(t *testing.T) {
	f := newFakeTracker()
	p := pendingPod("p1")
	f.at(time.Second).ObservedPodOnWatch(p)
	f.at(2 * time.Second).StartedPulling("p1")
	f.at(4 * time.Second).FinishedPulling("p1")
	f.at(5 * time.Second).StartedPulling("p1") // a second image: the first start counts
	f.at(7 * time.Second).FinishedPulling("p1")
	f.at(8 * time.Second).ObservedPodOnWatch(withStatus(p, false))
	if len(f.observed) != 0 {
		t.Fatalf("observed before all containers ran: %v", f.observed)
	}
	f.at(10 * time.Second).ObservedPodOnWatch(withStatus(p, true))
	f.at(12 * time.Second).ObservedPodOnWatch(withStatus(p, true))  // once only
	want := [][2]time.Duration{{5 * time.Second, 10 * time.Second}} // 10s minus 5s of pulls
	if len(f.observed) != 1 || f.observed[0] != want[0] {
		t.Errorf("observed %v, want %v", f.observed, want)
	}
}

func TestPodStartSLINotMeasured(t *testing.T) {
	f := newFakeTracker()
	// Seen first with a status the node already wrote (a restarted
	// agent): not measured.
	running := withStatus(pendingPod("old"), true)
	f.at(time.Second).ObservedPodOnWatch(running)
	f.at(2 * time.Second).ObservedPodOnWatch(running)
	// Deleted before it ran.
	gone := pendingPod("gone")
	f.ObservedPodOnWatch(gone)
	f.Forget("gone")
	f.at(3 * time.Second).ObservedPodOnWatch(withStatus(gone, true))
	// Finished before it was seen running.
	done := pendingPod("done")
	f.ObservedPodOnWatch(done)
	failed := withStatus(done, false)
	failed.Status.Phase = corev1.PodFailed
	f.ObservedPodOnWatch(failed)
	f.at(4 * time.Second).ObservedPodOnWatch(withStatus(done, true))
	// No containers in the status yet.
	empty := pendingPod("empty")
	f.ObservedPodOnWatch(empty)
	noContainers := withStatus(empty, true)
	noContainers.Status.ContainerStatuses = nil
	f.ObservedPodOnWatch(noContainers)
	if len(f.observed) != 0 {
		t.Errorf("observed %v, want nothing", f.observed)
	}
	// Pulls of an unknown pod, or a finish without a start, do nothing;
	// a pull that never finished takes nothing off.
	f.FinishedPulling("nosuch")
	p := pendingPod("p2")
	f.at(0).ObservedPodOnWatch(p)
	f.at(time.Second).FinishedPulling("p2")
	f.at(2 * time.Second).StartedPulling("p2")
	f.at(3 * time.Second).ObservedPodOnWatch(withStatus(p, true))
	if want := [2]time.Duration{3 * time.Second, 3 * time.Second}; len(f.observed) != 1 || f.observed[0] != want {
		t.Errorf("observed %v, want [%v]", f.observed, want)
	}
}

// TestPodStartHistogram: the tracker of New feeds upstream's histograms.
func TestPodStartHistogram(t *testing.T) {
	m := newMetrics(t)
	p := pendingPod("p1")
	p.CreationTimestamp = metav1.NewTime(time.Now().Add(-3 * time.Second))
	m.PodStart().ObservedPodOnWatch(p)
	m.PodStart().ObservedPodOnWatch(withStatus(p, true))
	out := scrape(t, m)
	for _, want := range []string{
		`kubelet_pod_start_sli_duration_seconds_count 1`,
		`kubelet_pod_start_sli_duration_seconds_bucket{le="2"} 0`,
		`kubelet_pod_start_sli_duration_seconds_bucket{le="4"} 1`,
		`kubelet_pod_start_total_duration_seconds_count 1`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("exposition lacks %q:\n%s", want, grepLines(out, "pod_start"))
		}
	}
}
