package controlplane

import (
	"fmt"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/util/workqueue"
)

// newRegistry is the control plane's own metrics registry (served on the
// API server's /metrics): the Go runtime and process collectors, as every
// upstream component exposes, and the workqueue metrics.
func newRegistry() (*prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, fmt.Errorf("register go collector: %w", err)
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, fmt.Errorf("register process collector: %w", err)
	}
	if err := registerWorkqueueMetrics(reg); err != nil {
		return nil, err
	}
	return reg, nil
}

// upstreamMetrics serves what upstream's controllers register in
// component-base's process-global legacy registry (job_controller_*,
// cronjob_controller_*, ...): legacy gathered, without the Go runtime and
// process families, which the control plane's own registry has (two
// families of one name would make the whole /metrics answer fail).
func upstreamMetrics(legacy prometheus.Gatherer) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		families, err := legacy.Gather()
		out := families[:0]
		for _, f := range families {
			if name := f.GetName(); strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
				continue
			}
			out = append(out, f)
		}
		return out, err
	})
}

// workqueueProviderOnce guards the one global in this package. client-go
// reads its workqueue metrics provider from a process-global, set once
// (later SetProvider calls are ignored), unless a queue's config names one;
// the controllers build their own queues and take no provider, and going
// through the global keeps them free of metrics plumbing. So the first
// control plane run in a process owns the workqueue metrics: cmd/controlplane
// runs exactly one. A second one in the same process (tests) serves no
// workqueue series rather than failing.
var workqueueProviderOnce sync.Once

// registerWorkqueueMetrics registers upstream's workqueue_* metrics (label
// name, the queue's name) in reg and makes them client-go's provider.
func registerWorkqueueMetrics(reg prometheus.Registerer) error {
	var err error
	workqueueProviderOnce.Do(func() {
		p := newWorkqueueProvider()
		for _, c := range p.collectors() {
			if err = reg.Register(c); err != nil {
				err = fmt.Errorf("register workqueue metrics: %w", err)
				return
			}
		}
		workqueue.SetProvider(p)
	})
	return err
}

// workqueueProvider implements workqueue.MetricsProvider with the names,
// help and buckets of k8s.io/component-base/metrics/prometheus/workqueue.
type workqueueProvider struct {
	depth, unfinished, longest *prometheus.GaugeVec
	adds, retries              *prometheus.CounterVec
	latency, workDuration      *prometheus.HistogramVec
}

func newWorkqueueProvider() *workqueueProvider {
	labels := []string{"name"}
	buckets := prometheus.ExponentialBuckets(10e-9, 10, 12)
	return &workqueueProvider{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "workqueue", Name: "depth",
			Help: "Current depth of workqueue"}, labels),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "workqueue", Name: "adds_total",
			Help: "Total number of adds handled by workqueue"}, labels),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "workqueue", Name: "queue_duration_seconds",
			Help: "How long in seconds an item stays in workqueue before being requested.", Buckets: buckets}, labels),
		workDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "workqueue", Name: "work_duration_seconds",
			Help: "How long in seconds processing an item from workqueue takes.", Buckets: buckets}, labels),
		unfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "workqueue", Name: "unfinished_work_seconds",
			Help: "How many seconds of work has done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases."}, labels),
		longest: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "workqueue", Name: "longest_running_processor_seconds",
			Help: "How many seconds has the longest running processor for workqueue been running."}, labels),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "workqueue", Name: "retries_total",
			Help: "Total number of retries handled by workqueue"}, labels),
	}
}

func (p *workqueueProvider) collectors() []prometheus.Collector {
	return []prometheus.Collector{p.depth, p.adds, p.latency, p.workDuration, p.unfinished, p.longest, p.retries}
}

func (p *workqueueProvider) NewDepthMetric(name string) workqueue.GaugeMetric {
	return p.depth.WithLabelValues(name)
}

func (p *workqueueProvider) NewAddsMetric(name string) workqueue.CounterMetric {
	return p.adds.WithLabelValues(name)
}

func (p *workqueueProvider) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return p.latency.WithLabelValues(name)
}

func (p *workqueueProvider) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return p.workDuration.WithLabelValues(name)
}

func (p *workqueueProvider) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.unfinished.WithLabelValues(name)
}

func (p *workqueueProvider) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.longest.WithLabelValues(name)
}

func (p *workqueueProvider) NewRetriesMetric(name string) workqueue.CounterMetric {
	return p.retries.WithLabelValues(name)
}
