package scheduler

import (
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics is the scheduler's Prometheus instrumentation under
// kube-scheduler's names. Create it once per registry and pass it to every
// Scheduler built on it (a re-elected leader builds a new Scheduler; the
// series carry on).
//   - scheduler_schedule_attempts_total{result,profile}
//   - scheduler_scheduling_attempt_duration_seconds{result,profile}: from
//     the start of the scheduling cycle to the end of binding, as upstream.
//   - scheduler_pending_pods{queue="active|backoff|unschedulable"}: read
//     from the live scheduler's queue at scrape time.
type Metrics struct {
	attempts *prometheus.CounterVec
	duration *prometheus.HistogramVec
	pending  *prometheus.Desc

	mu   sync.Mutex
	lens func() (active, backoff, unschedulable int)
}

// Scheduling results, upstream's label values.
const (
	resultScheduled     = "scheduled"
	resultUnschedulable = "unschedulable"
	resultError         = "error"
)

// NewMetrics registers the scheduler metrics in reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scheduler_schedule_attempts_total",
			Help: "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be scheduled, while 'error' means an internal scheduler problem.",
		}, []string{"result", "profile"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "scheduler_scheduling_attempt_duration_seconds",
			Help:    "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}, []string{"result", "profile"}),
		pending: prometheus.NewDesc("scheduler_pending_pods",
			"Number of pending pods, by the queue type. 'active' means number of pods in activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in unschedulablePods.",
			[]string{"queue"}, nil),
	}
	for _, c := range []prometheus.Collector{m.attempts, m.duration, pendingCollector{m}} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register scheduler metrics: %w", err)
		}
	}
	return m, nil
}

// pendingCollector reads the queue sizes only when scraped.
type pendingCollector struct{ m *Metrics }

func (c pendingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.m.pending }

func (c pendingCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.Lock()
	lens := c.m.lens
	c.m.mu.Unlock()
	if lens == nil {
		return
	}
	a, b, u := lens()
	ch <- prometheus.MustNewConstMetric(c.m.pending, prometheus.GaugeValue, float64(a), "active")
	ch <- prometheus.MustNewConstMetric(c.m.pending, prometheus.GaugeValue, float64(b), "backoff")
	ch <- prometheus.MustNewConstMetric(c.m.pending, prometheus.GaugeValue, float64(u), "unschedulable")
}

// profileMetrics are one scheduler's resolved series, so the scheduling
// loop does no label lookup. The zero value (no Metrics) records nothing.
type profileMetrics struct {
	attempts map[string]prometheus.Counter
	duration map[string]prometheus.Observer
}

// forProfile resolves the series of profile and makes lens the source of
// scheduler_pending_pods (the newest scheduler wins).
func (m *Metrics) forProfile(profile string, lens func() (int, int, int)) profileMetrics {
	if m == nil {
		return profileMetrics{}
	}
	m.mu.Lock()
	m.lens = lens
	m.mu.Unlock()
	pm := profileMetrics{attempts: map[string]prometheus.Counter{}, duration: map[string]prometheus.Observer{}}
	for _, r := range []string{resultScheduled, resultUnschedulable, resultError} {
		pm.attempts[r] = m.attempts.WithLabelValues(r, profile)
		pm.duration[r] = m.duration.WithLabelValues(r, profile)
	}
	return pm
}

// attempt records one scheduling attempt that began at start.
func (pm profileMetrics) attempt(result string, start time.Time) {
	if pm.attempts == nil {
		return
	}
	pm.attempts[result].Inc()
	pm.duration[result].Observe(time.Since(start).Seconds())
}
