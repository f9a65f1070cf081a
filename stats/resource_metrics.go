package stats

// The kubelet's /metrics/resource: the Summary's CPU and memory as
// Prometheus metrics, with the names, help texts and labels of upstream's
// pkg/kubelet/metrics/collectors/resource_metrics.go (swap omitted: not
// collected). Usage metrics carry their sample's timestamp, so a scraper
// sees when the value was read rather than when it was scraped; as
// upstream, container_start_time_seconds and the scrape error carry none.

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// resourceMetrics is a prometheus.Collector over a Collector's snapshot.
// Metrics exist only for what the last sample found: containers that are
// gone vanish instead of lingering as stale series.
type resourceMetrics struct {
	c                   *Collector
	nodeCPU, nodeMemory *prometheus.Desc
	containerCPU        *prometheus.Desc
	containerMemory     *prometheus.Desc
	containerStart      *prometheus.Desc
	podCPU, podMemory   *prometheus.Desc
	// scrapeError and its stable twin resourceScrapeError are 1 when the
	// last sample failed (or none was taken yet), else 0.
	scrapeError, resourceScrapeError *prometheus.Desc
}

func newResourceMetrics(c *Collector) *resourceMetrics {
	containerLabels := []string{"container", "pod", "namespace"}
	podLabels := []string{"pod", "namespace"}
	const scrapeHelp = "1 if there was an error while getting container metrics, 0 otherwise"
	return &resourceMetrics{
		c:                   c,
		nodeCPU:             prometheus.NewDesc("node_cpu_usage_seconds_total", "Cumulative cpu time consumed by the node in core-seconds", nil, nil),
		nodeMemory:          prometheus.NewDesc("node_memory_working_set_bytes", "Current working set of the node in bytes", nil, nil),
		containerCPU:        prometheus.NewDesc("container_cpu_usage_seconds_total", "Cumulative cpu time consumed by the container in core-seconds", containerLabels, nil),
		containerMemory:     prometheus.NewDesc("container_memory_working_set_bytes", "Current working set of the container in bytes", containerLabels, nil),
		containerStart:      prometheus.NewDesc("container_start_time_seconds", "Start time of the container since unix epoch in seconds", containerLabels, nil),
		podCPU:              prometheus.NewDesc("pod_cpu_usage_seconds_total", "Cumulative cpu time consumed by the pod in core-seconds", podLabels, nil),
		podMemory:           prometheus.NewDesc("pod_memory_working_set_bytes", "Current working set of the pod in bytes", podLabels, nil),
		scrapeError:         prometheus.NewDesc("scrape_error", scrapeHelp, nil, nil),
		resourceScrapeError: prometheus.NewDesc("resource_scrape_error", scrapeHelp, nil, nil),
	}
}

// newResourceMetricsHandler registers c's resource metrics in a registry
// of their own and serves that registry.
func newResourceMetricsHandler(c *Collector) (http.Handler, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(newResourceMetrics(c)); err != nil {
		return nil, fmt.Errorf("stats: register resource metrics: %w", err)
	}
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      promLogger{c.cfg.Log},
		ErrorHandling: promhttp.ContinueOnError,
	}), nil
}

// Describe implements prometheus.Collector.
func (r *resourceMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{r.nodeCPU, r.nodeMemory, r.containerCPU, r.containerMemory,
		r.containerStart, r.podCPU, r.podMemory, r.scrapeError, r.resourceScrapeError} {
		ch <- d
	}
}

// Collect implements prometheus.Collector from the Summary of the last
// sample.
func (r *resourceMetrics) Collect(ch chan<- prometheus.Metric) {
	snap := r.c.state.Load()
	failed := 0.0
	if snap.err != nil {
		failed = 1
	}
	s := r.c.summaryOf(snap)
	ch <- constMetric(r.scrapeError, prometheus.GaugeValue, time.Time{}, failed)
	ch <- constMetric(r.resourceScrapeError, prometheus.GaugeValue, time.Time{}, failed)
	r.collectUsage(ch, r.nodeCPU, r.nodeMemory, s.Node.CPU, s.Node.Memory)
	for _, p := range s.Pods {
		ns, name := p.PodRef.Namespace, p.PodRef.Name
		for _, ct := range p.Containers {
			if ct.StartTime.Unix() > 0 {
				ch <- constMetric(r.containerStart, prometheus.GaugeValue, time.Time{},
					float64(ct.StartTime.UnixNano())/float64(time.Second), ct.Name, name, ns)
			}
			r.collectUsage(ch, r.containerCPU, r.containerMemory, ct.CPU, ct.Memory, ct.Name, name, ns)
		}
		r.collectUsage(ch, r.podCPU, r.podMemory, p.CPU, p.Memory, name, ns)
	}
}

// collectUsage sends the cumulative CPU time (in core-seconds) and the
// working set, each stamped with its sample's time, when present.
func (r *resourceMetrics) collectUsage(ch chan<- prometheus.Metric, cpuDesc, memDesc *prometheus.Desc,
	cpu *statsv1alpha1.CPUStats, mem *statsv1alpha1.MemoryStats, labels ...string) {
	if cpu != nil && cpu.UsageCoreNanoSeconds != nil {
		ch <- constMetric(cpuDesc, prometheus.CounterValue, cpu.Time.Time,
			float64(*cpu.UsageCoreNanoSeconds)/float64(time.Second), labels...)
	}
	if mem != nil && mem.WorkingSetBytes != nil {
		ch <- constMetric(memDesc, prometheus.GaugeValue, mem.Time.Time, float64(*mem.WorkingSetBytes), labels...)
	}
}

// constMetric makes a metric, stamped with t unless t is zero. A metric
// that cannot be made (wrong label count: a bug) is reported as invalid,
// which fails that metric, not the scrape.
func constMetric(desc *prometheus.Desc, vt prometheus.ValueType, t time.Time, v float64, labels ...string) prometheus.Metric {
	m, err := prometheus.NewConstMetric(desc, vt, v, labels...)
	if err != nil {
		return prometheus.NewInvalidMetric(desc, err)
	}
	if t.IsZero() {
		return m
	}
	return prometheus.NewMetricWithTimestamp(t, m)
}

// promLogger logs promhttp's errors through slog.
type promLogger struct{ log *slog.Logger }

func (l promLogger) Println(v ...any) {
	l.log.Warn("stats: serve resource metrics: " + fmt.Sprint(v...))
}
