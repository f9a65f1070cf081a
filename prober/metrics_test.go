package prober

import (
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// fakeMetrics records the probes observed and the pods forgotten.
type fakeMetrics struct {
	mu        sync.Mutex
	observed  []string
	forgotten []types.UID
}

func (f *fakeMetrics) ObserveProbe(pod *corev1.Pod, container, probeType, result string, _ time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.observed = append(f.observed, pod.Namespace+"/"+pod.Name+"/"+container+" "+probeType+" "+result)
}

func (f *fakeMetrics) ForgetProbes(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forgotten = append(f.forgotten, uid)
}

// TestMetrics: every probe that ran is observed before thresholds, with
// upstream's spelling; RemovePod forgets the pod's series.
func TestMetrics(t *testing.T) {
	h := newSyncHarness(map[string][]int{"ready": {0, 1, 0}, "live": {1}})
	f := &fakeMetrics{}
	h.m.cfg.Metrics = f
	pod := testPod(corev1.Container{Name: "app", ReadinessProbe: execProbe("ready", nil), LivenessProbe: execProbe("live", nil)})
	h.m.UpdatePod(pod, "", []ContainerState{running("app", "containerd://c1", t0)})
	for range 3 {
		h.probe(h.worker(t, "app", Readiness))
	}
	h.probe(h.worker(t, "app", Liveness))
	want := []string{
		"ns/web/app Readiness successful", "ns/web/app Readiness failed", "ns/web/app Readiness successful",
		"ns/web/app Liveness failed",
	}
	if !slices.Equal(f.observed, want) {
		t.Errorf("observed %q, want %q", f.observed, want)
	}
	h.m.RemovePod(pod.UID)
	if !slices.Equal(f.forgotten, []types.UID{pod.UID}) {
		t.Errorf("forgotten %v", f.forgotten)
	}
}

func TestResultMetricLabel(t *testing.T) {
	for r, want := range map[Result]string{Success: "successful", Warning: "successful", Failure: "failed", Unknown: "unknown"} {
		if got := r.metricLabel(); got != want {
			t.Errorf("%v: %q, want %q", r, got, want)
		}
	}
}
