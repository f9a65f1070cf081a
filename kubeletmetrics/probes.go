package kubeletmetrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Probe results as prober_probe_total spells them.
const (
	ProbeSuccessful = "successful"
	ProbeFailed     = "failed"
	ProbeUnknown    = "unknown"
)

// ObserveProbe records one probe that ran (upstream does not count a
// probe that errored): prober_probe_total{probe_type, result, container,
// pod, namespace, pod_uid}, and, as upstream, its duration in
// prober_probe_duration_seconds for successful and unknown results only.
// probeType is "Liveness", "Readiness" or "Startup"; result one of
// ProbeSuccessful, ProbeFailed, ProbeUnknown.
func (m *Metrics) ObserveProbe(pod *corev1.Pod, container, probeType, result string, took time.Duration) {
	if m == nil {
		return
	}
	m.probedMu.Lock()
	m.probed[pod.UID] = podRef{namespace: pod.Namespace, name: pod.Name}
	m.probedMu.Unlock()
	m.probeTotal.WithLabelValues(probeType, result, container, pod.Name, pod.Namespace, string(pod.UID)).Inc()
	if result != ProbeFailed {
		m.probeDuration.WithLabelValues(probeType, container, pod.Name, pod.Namespace).Observe(took.Seconds())
	}
}

// ForgetProbes drops the probe series of a pod that is gone, as
// upstream's probe workers delete theirs when they stop.
func (m *Metrics) ForgetProbes(uid types.UID) {
	if m == nil {
		return
	}
	m.probedMu.Lock()
	ref, ok := m.probed[uid]
	delete(m.probed, uid)
	m.probedMu.Unlock()
	if !ok {
		return
	}
	m.probeTotal.DeletePartialMatch(prometheus.Labels{"pod_uid": string(uid)})
	m.probeDuration.DeletePartialMatch(prometheus.Labels{"namespace": ref.namespace, "pod": ref.name})
}
