package nodelet

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/kubeletmetrics"
	"github.com/nodelet/nodelet/runtime"
)

type recordedEvents []string

func (r *recordedEvents) Eventf(_ apiruntime.Object, _, reason, _ string, _ ...any) {
	*r = append(*r, reason)
}

// TestPullTimingRecorder: the Syncer's Pulling and Pulled events of a pod
// reach the pod start tracker, every event goes on, and the pull time is
// left out of the SLI.
func TestPullTimingRecorder(t *testing.T) {
	m, err := kubeletmetrics.New("node-a")
	if err != nil {
		t.Fatal(err)
	}
	var events recordedEvents
	rec := pullTimingRecorder{&events, m.PodStart()}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1",
		CreationTimestamp: metav1.NewTime(time.Now().Add(-2 * time.Second))}}
	m.PodStart().ObservedPodOnWatch(pod)
	s := &Syncer{cfg: SyncerConfig{Recorder: rec}}
	s.containerEvent(pod, "app", corev1.EventTypeNormal, eventPulling, "Pulling image %q", "x")
	time.Sleep(1100 * time.Millisecond)
	s.containerEvent(pod, "app", corev1.EventTypeNormal, eventPulled, "Successfully pulled image %q", "x")
	s.podEvent(pod, corev1.EventTypeNormal, eventStarted, "Started")
	if want := []string{eventPulling, eventPulled, eventStarted}; !slices.Equal(events, want) {
		t.Errorf("events passed on %v, want %v", events, want)
	}
	running := pod.DeepCopy()
	running.Status.StartTime = &metav1.Time{Time: time.Now()}
	running.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app",
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}
	m.PodStart().ObservedPodOnWatch(running)
	var sli, total float64
	for _, line := range strings.Split(scrapeMetrics(t, m), "\n") {
		if v, ok := strings.CutPrefix(line, "kubelet_pod_start_sli_duration_seconds_sum "); ok {
			sli = parseFloat(t, v)
		}
		if v, ok := strings.CutPrefix(line, "kubelet_pod_start_total_duration_seconds_sum "); ok {
			total = parseFloat(t, v)
		}
	}
	if total < 3 || total-sli < 1 || total-sli > 2 {
		t.Errorf("pod start: SLI %vs, total %vs: want the ~1.1s pull left out of a ~3s start", sli, total)
	}
}

// TestGCCounters: the collectors count what they removed.
func TestGCCounters(t *testing.T) {
	pods := []runtime.PodStatus{{UID: "gone", Namespace: "ns", Name: "p",
		Sandboxes:  []runtime.SandboxStatus{{ID: "sb", State: runtime.StateExited}},
		Containers: []runtime.ContainerStatus{{ID: "c0", Name: "app", State: runtime.StateExited, SandboxID: "sb"}}}}
	var kinds []string
	gc := &containerGC{policy: runtime.DefaultGCPolicy,
		list:            func(context.Context) ([]runtime.PodStatus, error) { return pods, nil },
		removeContainer: func(context.Context, string) error { return nil },
		removeSandbox:   func(context.Context, string) error { return nil },
		isPodLive:       func(types.UID) bool { return false },
		removed:         func(kind string) { kinds = append(kinds, kind) },
		now:             time.Now, log: slog.New(slog.DiscardHandler)}
	if err := gc.collect(context.Background()); err != nil {
		t.Fatal(err)
	}
	slices.Sort(kinds)
	if want := []string{"container", "sandbox"}; !slices.Equal(kinds, want) {
		t.Errorf("container gc counted %v, want %v", kinds, want)
	}

	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := &fakeImages{imgs: []runtime.StoredImage{{ID: "a", Records: []string{"a:1"}, Size: 200}}}
	g := f.gc(runtime.FSUsage{Capacity: 1000, Available: 100}, &now)
	var reasons []string
	g.removed = func(reason string) { reasons = append(reasons, reason) }
	g.collect(context.Background()) // first seen now: too young
	now = now.Add(time.Hour)
	if err := g.collect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(reasons, []string{"space"}) || !slices.Equal(f.removed, []string{"a"}) {
		t.Errorf("image gc removed %v, counted %v", f.removed, reasons)
	}
}

func scrapeMetrics(t *testing.T, m *kubeletmetrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

func parseFloat(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
