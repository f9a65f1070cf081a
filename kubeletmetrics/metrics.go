// Package kubeletmetrics is the nodelet's own Prometheus metrics, served at
// /metrics on its HTTPS API. Where a metric means what one of upstream's
// kubelet metrics means it keeps upstream's name, labels and buckets
// (pkg/kubelet/metrics, pkg/kubelet/prober), so that dashboards and alerts
// written for the kubelet work; the few without an upstream counterpart
// are prefixed nodelet_.
//
// One Metrics per agent owns its prometheus.Registry (no global registry,
// nothing registered in init). The components never import this package:
// each takes a small interface or a function field of its own (pleg.Metrics,
// prober.Metrics, containerd.RegistryConfig.ObservePull, ...) which *Metrics
// satisfies, and records nothing when it is nil. Every method is also safe
// on a nil *Metrics.
package kubeletmetrics

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/types"
)

// Upstream's buckets.
var (
	// podStartBuckets: pkg/kubelet/metrics podStartupDurationBuckets.
	podStartBuckets = []float64{0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}
	// imagePullBuckets: pkg/kubelet/metrics imagePullDurationBuckets.
	imagePullBuckets = []float64{1, 5, 10, 20, 30, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}
)

// imageSizeBuckets are upstream's image_size_in_bytes label values: an
// image gets the label of the last bucket whose lower bound it reaches.
var imageSizeBuckets = []struct {
	from  uint64
	label string
}{
	{0, "0-10MB"},
	{10 << 20, "10MB-100MB"},
	{100 << 20, "100MB-500MB"},
	{500 << 20, "500MB-1GB"},
	{1 << 30, "1GB-5GB"},
	{5 << 30, "5GB-10GB"},
	{10 << 30, "10GB-20GB"},
	{20 << 30, "20GB-30GB"},
	{30 << 30, "30GB-40GB"},
	{40 << 30, "40GB-60GB"},
	{60 << 30, "60GB-100GB"},
	{100 << 30, "GT100GB"},
}

// ImageSizeBucket is the image_size_in_bytes label of an image of size
// bytes, as upstream's GetImageSizeBucket.
func ImageSizeBucket(size int64) string {
	label := imageSizeBuckets[0].label
	for _, b := range imageSizeBuckets {
		if size >= 0 && uint64(size) >= b.from {
			label = b.label
		}
	}
	return label
}

// Container states of kubelet_running_containers, upstream's values (the
// runtime's State spelled the same way).
var containerStates = []string{"created", "running", "exited", "unknown"}

// Metrics is one node agent's metrics.
type Metrics struct {
	// reg has everything but the probe metrics, probeReg those (upstream
	// serves them apart at /metrics/probes; /metrics here has both).
	reg, probeReg *prometheus.Registry

	nodeName *prometheus.GaugeVec
	volumes  *volumeStats

	plegRelist, plegInterval prometheus.Histogram
	plegDiscard              prometheus.Counter
	plegLastSeen             prometheus.Gauge
	runningPods              prometheus.Gauge
	runningContainers        *prometheus.GaugeVec

	podStartSLI, podStartTotal prometheus.Histogram
	imagePull                  *prometheus.HistogramVec

	probeTotal    *prometheus.CounterVec
	probeDuration *prometheus.HistogramVec
	probedMu      sync.Mutex
	probed        map[types.UID]podRef // pods with probe series, for ForgetProbes

	evictions   *prometheus.CounterVec
	containerGC *prometheus.CounterVec
	imageGC     *prometheus.CounterVec

	logDroppedBytes, logDroppedLines prometheus.Counter

	podStart *PodStartTracker
}

type podRef struct{ namespace, name string }

// New makes the metrics of the node nodeName, registered in a registry
// of their own with the Go runtime and process collectors.
func New(nodeName string) (*Metrics, error) {
	m := &Metrics{
		reg:      prometheus.NewRegistry(),
		probeReg: prometheus.NewRegistry(),
		nodeName: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "kubelet", Name: "node_name",
			Help: "The node's name. The count is always 1."}, []string{"node"}),
		plegRelist: prometheus.NewHistogram(prometheus.HistogramOpts{Subsystem: "kubelet", Name: "pleg_relist_duration_seconds",
			Help: "Duration in seconds for relisting pods in PLEG.", Buckets: prometheus.DefBuckets}),
		plegInterval: prometheus.NewHistogram(prometheus.HistogramOpts{Subsystem: "kubelet", Name: "pleg_relist_interval_seconds",
			Help: "Interval in seconds between relisting in PLEG.", Buckets: prometheus.DefBuckets}),
		plegDiscard: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: "kubelet", Name: "pleg_discard_events",
			Help: "The number of discard events in PLEG."}),
		plegLastSeen: prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: "kubelet", Name: "pleg_last_seen_seconds",
			Help: "Timestamp in seconds when PLEG was last seen active."}),
		runningPods: prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: "kubelet", Name: "running_pods",
			Help: "Number of pods that have a running pod sandbox"}),
		runningContainers: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "kubelet", Name: "running_containers",
			Help: "Number of containers currently running"}, []string{"container_state"}),
		podStartSLI: prometheus.NewHistogram(prometheus.HistogramOpts{Subsystem: "kubelet", Name: "pod_start_sli_duration_seconds",
			Help:    "Duration in seconds to start a pod, excluding time to pull images and run init containers, measured from pod creation timestamp to when all its containers are reported as started and observed via watch",
			Buckets: podStartBuckets}),
		podStartTotal: prometheus.NewHistogram(prometheus.HistogramOpts{Subsystem: "kubelet", Name: "pod_start_total_duration_seconds",
			Help:    "Duration in seconds to start a pod since creation, including time to pull images and run init containers, measured from pod creation timestamp to when all its containers are reported as started and observed via watch",
			Buckets: podStartBuckets}),
		imagePull: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "kubelet", Name: "image_pull_duration_seconds",
			Help: "Duration in seconds to pull an image.", Buckets: imagePullBuckets}, []string{"image_size_in_bytes"}),
		probeTotal: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "prober", Name: "probe_total",
			Help: "Cumulative number of a liveness, readiness or startup probe for a container by result."},
			[]string{"probe_type", "result", "container", "pod", "namespace", "pod_uid"}),
		probeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "prober", Name: "probe_duration_seconds",
			Help: "Duration in seconds for a probe response.", Buckets: prometheus.DefBuckets},
			[]string{"probe_type", "container", "pod", "namespace"}),
		probed:  map[types.UID]podRef{},
		volumes: &volumeStats{},
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "kubelet", Name: "evictions",
			Help: "Cumulative number of pod evictions by eviction signal"}, []string{"eviction_signal"}),
		containerGC: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "nodelet", Name: "container_gc_removed_total",
			Help: "Cumulative number of dead containers and sandboxes removed by the container garbage collection, by kind (container or sandbox)."},
			[]string{"kind"}),
		imageGC: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "kubelet", Name: "image_garbage_collected_total",
			Help: "Total number of images garbage collected by the kubelet, whether through disk usage or image age."}, []string{"reason"}),
		logDroppedBytes: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "nodelet", Name: "container_log_dropped_bytes_total",
			Help: "Cumulative number of bytes of containers' output the node's container logger dropped because their log files refused writes (a full disk, a failed rotation)."}),
		logDroppedLines: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "nodelet", Name: "container_log_dropped_lines_total",
			Help: "Cumulative number of log lines (or parts of lines over 16 KiB) of containers' output the node's container logger dropped because their log files refused writes."}),
	}
	m.podStart = newPodStartTracker(m.observePodStart, time.Now)
	m.nodeName.WithLabelValues(nodeName).Set(1)
	for _, s := range containerStates {
		m.runningContainers.WithLabelValues(s)
	}
	for _, k := range []string{"container", "sandbox"} {
		m.containerGC.WithLabelValues(k)
	}
	m.imageGC.WithLabelValues("space")
	cs := []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.nodeName, m.plegRelist, m.plegInterval, m.plegDiscard, m.plegLastSeen, m.runningPods, m.runningContainers,
		m.podStartSLI, m.podStartTotal, m.imagePull, m.evictions, m.containerGC, m.imageGC, m.volumes,
		m.logDroppedBytes, m.logDroppedLines,
	}
	for _, c := range cs {
		if err := m.reg.Register(c); err != nil {
			return nil, fmt.Errorf("kubeletmetrics: register: %w", err)
		}
	}
	for _, c := range []prometheus.Collector{m.probeTotal, m.probeDuration} {
		if err := m.probeReg.Register(c); err != nil {
			return nil, fmt.Errorf("kubeletmetrics: register: %w", err)
		}
	}
	return m, nil
}

// PodStart tracks pods from their creation to all containers running
// (kubelet_pod_start_sli_duration_seconds, see PodStartTracker); nil for
// a nil Metrics, and a nil tracker records nothing.
func (m *Metrics) PodStart() *PodStartTracker {
	if m == nil {
		return nil
	}
	return m.podStart
}

// Handler serves every metric (/metrics) in Prometheus' exposition
// formats; nil for a nil Metrics.
func (m *Metrics) Handler() http.Handler {
	if m == nil {
		return nil
	}
	return promhttp.HandlerFor(prometheus.Gatherers{m.reg, m.probeReg}, promhttp.HandlerOpts{})
}

// ProbesHandler serves the probe metrics only, as upstream's
// /metrics/probes; nil for a nil Metrics.
func (m *Metrics) ProbesHandler() http.Handler {
	if m == nil {
		return nil
	}
	return promhttp.HandlerFor(m.probeReg, promhttp.HandlerOpts{})
}

// ObserveRelist records one PLEG relist, failed ones too: how long it
// took and, when there was one before, the time since the previous one
// started (kubelet_pleg_relist_duration_seconds, _interval_seconds).
func (m *Metrics) ObserveRelist(took, interval time.Duration) {
	if m == nil {
		return
	}
	m.plegRelist.Observe(took.Seconds())
	if interval > 0 {
		m.plegInterval.Observe(interval.Seconds())
	}
}

// ObserveRuntimePods records what a successful relist started at ts
// found: the pods with a running sandbox (kubelet_running_pods) and the
// containers by state (kubelet_running_containers; states not in the map
// are 0).
func (m *Metrics) ObserveRuntimePods(ts time.Time, runningPods int, containers map[string]int) {
	if m == nil {
		return
	}
	m.plegLastSeen.Set(float64(ts.Unix()))
	m.runningPods.Set(float64(runningPods))
	for _, s := range containerStates {
		m.runningContainers.WithLabelValues(s).Set(float64(containers[s]))
	}
	for s, n := range containers {
		m.runningContainers.WithLabelValues(s).Set(float64(n))
	}
}

// DiscardedEvent counts a PLEG event dropped because its channel was full
// (kubelet_pleg_discard_events).
func (m *Metrics) DiscardedEvent() {
	if m == nil {
		return
	}
	m.plegDiscard.Inc()
}

// ObservePull records an image pulled from a registry in took, of size
// bytes (kubelet_image_pull_duration_seconds{image_size_in_bytes}).
func (m *Metrics) ObservePull(took time.Duration, size int64) {
	if m == nil {
		return
	}
	m.imagePull.WithLabelValues(ImageSizeBucket(size)).Observe(took.Seconds())
}

// Evicted counts one pod evicted by the node for an eviction signal such
// as "memory.available" (kubelet_evictions{eviction_signal}). It has the
// shape of the eviction manager's OnEvict hook.
func (m *Metrics) Evicted(signal string) {
	if m == nil {
		return
	}
	m.evictions.WithLabelValues(signal).Inc()
}

// ContainerGCRemoved counts a dead container or sandbox (kind "container"
// or "sandbox") removed by the container GC
// (nodelet_container_gc_removed_total{kind}; upstream has no such metric).
func (m *Metrics) ContainerGCRemoved(kind string) {
	if m == nil {
		return
	}
	m.containerGC.WithLabelValues(kind).Inc()
}

// ImageGCRemoved counts an image removed by the image GC, for reason
// "space" (the disk was above the high threshold) or "age"
// (kubelet_image_garbage_collected_total{reason}).
func (m *Metrics) ImageGCRemoved(reason string) {
	if m == nil {
		return
	}
	m.imageGC.WithLabelValues(reason).Inc()
}

// ContainerLogDropped counts containers' output the node's container
// logger dropped while their log files refused writes
// (nodelet_container_log_dropped_bytes_total, _lines_total; per node, no
// labels; upstream has no such metric). It has the shape of
// containerlogs.DropMetrics.
func (m *Metrics) ContainerLogDropped(bytes, lines uint64) {
	if m == nil {
		return
	}
	m.logDroppedBytes.Add(float64(bytes))
	m.logDroppedLines.Add(float64(lines))
}

func (m *Metrics) observePodStart(sli, total time.Duration) {
	m.podStartSLI.Observe(sli.Seconds())
	m.podStartTotal.Observe(total.Seconds())
}
