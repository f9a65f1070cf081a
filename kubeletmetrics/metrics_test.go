package kubeletmetrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func newMetrics(t *testing.T) *Metrics {
	t.Helper()
	m, err := New("node-1")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// scrape returns the text exposition of m's handler.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	return scrapeHandler(t, m.Handler())
}

func scrapeHandler(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape: %d %s", rec.Code, rec.Body)
	}
	body, _ := io.ReadAll(rec.Body)
	return string(body)
}

func TestNewExposesUpstreamNames(t *testing.T) {
	m := newMetrics(t)
	out := scrape(t, m)
	for _, want := range []string{
		`kubelet_node_name{node="node-1"} 1`,
		`kubelet_running_pods 0`,
		`kubelet_running_containers{container_state="running"} 0`,
		`kubelet_running_containers{container_state="exited"} 0`,
		`kubelet_pleg_relist_duration_seconds_count 0`,
		`kubelet_pod_start_sli_duration_seconds_count 0`,
		`kubelet_image_garbage_collected_total{reason="space"} 0`,
		`nodelet_container_gc_removed_total{kind="sandbox"} 0`,
		`nodelet_container_log_dropped_bytes_total 0`,
		`go_goroutines `,
		`process_cpu_seconds_total `,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("exposition lacks %q", want)
		}
	}
	// A second agent in the same process has registries of its own.
	if _, err := New("node-2"); err != nil {
		t.Errorf("second New: %v", err)
	}
}

func TestPLEGMetrics(t *testing.T) {
	m := newMetrics(t)
	m.ObserveRelist(20*time.Millisecond, 0)
	m.ObserveRelist(30*time.Millisecond, time.Second)
	ts := time.Unix(1700000000, 0)
	m.ObserveRuntimePods(ts, 2, map[string]int{"running": 3, "exited": 1})
	m.ObserveRuntimePods(ts, 1, map[string]int{"running": 1})
	m.DiscardedEvent()
	if n := testutil.CollectAndCount(m.plegRelist); n != 1 {
		t.Fatalf("relist histogram series: %d", n)
	}
	out := scrape(t, m)
	for _, want := range []string{
		`kubelet_pleg_relist_duration_seconds_count 2`,
		`kubelet_pleg_relist_duration_seconds_sum 0.05`,
		`kubelet_pleg_relist_duration_seconds_bucket{le="0.025"} 1`,
		`kubelet_pleg_relist_interval_seconds_count 1`,
		`kubelet_pleg_last_seen_seconds 1.7e+09`,
		`kubelet_pleg_discard_events 1`,
		`kubelet_running_pods 1`,
		`kubelet_running_containers{container_state="running"} 1`,
		// A state no longer seen goes back to 0.
		`kubelet_running_containers{container_state="exited"} 0`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("exposition lacks %q:\n%s", want, grepLines(out, "kubelet_"))
		}
	}
}

func TestImageSizeBucket(t *testing.T) {
	for _, tc := range []struct {
		size int64
		want string
	}{
		{0, "0-10MB"}, {-1, "0-10MB"}, {5 << 20, "0-10MB"}, {10 << 20, "10MB-100MB"}, {15 << 20, "10MB-100MB"},
		{500 << 20, "500MB-1GB"}, {15 << 30, "10GB-20GB"}, {200 << 30, "GT100GB"},
	} {
		if got := ImageSizeBucket(tc.size); got != tc.want {
			t.Errorf("ImageSizeBucket(%d) = %q, want %q", tc.size, got, tc.want)
		}
	}
}

func TestObservePull(t *testing.T) {
	m := newMetrics(t)
	m.ObservePull(3*time.Second, 4<<20)
	m.ObservePull(12*time.Second, 50<<20)
	out := scrape(t, m)
	for _, want := range []string{
		`kubelet_image_pull_duration_seconds_bucket{image_size_in_bytes="0-10MB",le="5"} 1`,
		`kubelet_image_pull_duration_seconds_bucket{image_size_in_bytes="0-10MB",le="1"} 0`,
		`kubelet_image_pull_duration_seconds_count{image_size_in_bytes="10MB-100MB"} 1`,
		`kubelet_image_pull_duration_seconds_sum{image_size_in_bytes="10MB-100MB"} 12`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("exposition lacks %q:\n%s", want, grepLines(out, "image_pull"))
		}
	}
}

func TestProbeMetrics(t *testing.T) {
	m := newMetrics(t)
	web := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-web"}}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db", UID: "uid-db"}}
	m.ObserveProbe(web, "app", "Readiness", ProbeSuccessful, 10*time.Millisecond)
	m.ObserveProbe(web, "app", "Readiness", ProbeSuccessful, 20*time.Millisecond)
	m.ObserveProbe(web, "app", "Liveness", ProbeFailed, time.Second)
	m.ObserveProbe(other, "db", "Startup", ProbeUnknown, time.Millisecond)
	out := scrape(t, m)
	for _, want := range []string{
		`prober_probe_total{container="app",namespace="default",pod="web",pod_uid="uid-web",probe_type="Readiness",result="successful"} 2`,
		`prober_probe_total{container="app",namespace="default",pod="web",pod_uid="uid-web",probe_type="Liveness",result="failed"} 1`,
		`prober_probe_duration_seconds_count{container="app",namespace="default",pod="web",probe_type="Readiness"} 2`,
		`prober_probe_duration_seconds_count{container="db",namespace="default",pod="db",probe_type="Startup"} 1`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("exposition lacks %q:\n%s", want, grepLines(out, "prober_"))
		}
	}
	// /metrics/probes has the probe metrics alone, as upstream's.
	probes := scrapeHandler(t, m.ProbesHandler())
	if !strings.Contains(probes, `prober_probe_total{container="app"`) || strings.Contains(probes, "kubelet_") || strings.Contains(probes, "go_goroutines") {
		t.Errorf("/metrics/probes:\n%s", probes)
	}
	// As upstream, failed probes are counted but not timed.
	if strings.Contains(out, `probe_type="Liveness"}`) {
		t.Errorf("a failed probe was timed:\n%s", grepLines(out, "prober_"))
	}
	m.ForgetProbes("uid-web")
	m.ForgetProbes("uid-unknown")
	out = scrape(t, m)
	if strings.Contains(out, `pod="web"`) || !strings.Contains(out, `pod="db"`) {
		t.Errorf("after ForgetProbes(web):\n%s", grepLines(out, "prober_"))
	}
}

func TestCounters(t *testing.T) {
	m := newMetrics(t)
	m.Evicted("memory.available")
	m.Evicted("memory.available")
	m.Evicted("nodefs.available")
	m.ContainerGCRemoved("container")
	m.ContainerGCRemoved("sandbox")
	m.ContainerGCRemoved("container")
	m.ImageGCRemoved("space")
	m.ContainerLogDropped(100, 2)
	m.ContainerLogDropped(50, 1)
	for series, want := range map[string]float64{
		`nodelet_container_log_dropped_bytes_total`:             150,
		`nodelet_container_log_dropped_lines_total`:             3,
		`kubelet_evictions{eviction_signal="memory.available"}`: 2,
		`kubelet_evictions{eviction_signal="nodefs.available"}`: 1,
		`nodelet_container_gc_removed_total{kind="container"}`:  2,
		`nodelet_container_gc_removed_total{kind="sandbox"}`:    1,
		`kubelet_image_garbage_collected_total{reason="space"}`: 1,
	} {
		if !strings.Contains(scrape(t, m), series+" "+strconv.FormatFloat(want, 'g', -1, 64)) {
			t.Errorf("%s != %v", series, want)
		}
	}
}

// TestNilMetrics: every hook is safe on a nil *Metrics, so components and
// tests can run without metrics.
func TestNilMetrics(t *testing.T) {
	var m *Metrics
	pod := &corev1.Pod{}
	m.ObserveRelist(time.Second, time.Second)
	m.ObserveRuntimePods(time.Now(), 1, nil)
	m.DiscardedEvent()
	m.ObservePull(time.Second, 1)
	m.ObserveProbe(pod, "c", "Liveness", ProbeFailed, time.Second)
	m.ForgetProbes("x")
	m.Evicted("memory.available")
	m.ContainerGCRemoved("container")
	m.ImageGCRemoved("space")
	m.ContainerLogDropped(1, 1)
	m.PodStart().ObservedPodOnWatch(pod)
	m.PodStart().StartedPulling("x")
	m.PodStart().FinishedPulling("x")
	m.PodStart().Forget("x")
	if m.Handler() != nil || m.ProbesHandler() != nil {
		t.Error("nil Metrics has a handler")
	}
}

func grepLines(out, sub string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, sub) && !strings.HasPrefix(l, "#") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
