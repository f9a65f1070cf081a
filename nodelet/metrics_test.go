package nodelet

import (
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/podlifecycle"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/nodelet/nodelet/kubeletmetrics"
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
	// The Syncer records its events so (podlifecycle's containerEvent).
	ctr := podlifecycle.PodReference(pod, podlifecycle.ContainerFieldPath(pod, "app"))
	rec.Eventf(ctr, corev1.EventTypeNormal, podlifecycle.EventPulling, "Pulling image %q", "x")
	time.Sleep(1100 * time.Millisecond)
	rec.Eventf(ctr, corev1.EventTypeNormal, podlifecycle.EventPulled, "Successfully pulled image %q", "x")
	rec.Eventf(podlifecycle.PodReference(pod, ""), corev1.EventTypeNormal, "Started", "Started")
	if want := []string{podlifecycle.EventPulling, podlifecycle.EventPulled, "Started"}; !slices.Equal(events, want) {
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
