// Package stats samples the resource usage of the node and of the
// containers of its pods, and serves it as the kubelet does: the Summary
// API (/stats/summary, k8s.io/kubelet's stats/v1alpha1, which the
// metrics.k8s.io API and `kubectl top` read) and the Prometheus resource
// metrics (/metrics/resource).
//
// A Collector samples every Interval. Like cAdvisor, whose samples
// metrics-server turns into rates, it keeps the last two samples of the
// node and of each container and reports CPU as a rate (usageNanoCores)
// over the window between them; the cumulative counters are reported from
// the latest sample. Readers get the result of the last sample, never a
// half-done one, and never wait for a sample in progress.
package stats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/runtime"
)

const (
	// DefaultInterval is how often a Collector samples unless configured.
	DefaultInterval = 10 * time.Second
	// DefaultProcRoot is where the node's numbers are read from.
	DefaultProcRoot = "/proc"
)

// errNoSample is the scrape error reported before the first sample.
var errNoSample = errors.New("stats: no sample taken yet")

// Runtime is what the collector needs of the container runtime: the usage
// of every running sandbox and container. *containerd.Runtime satisfies it.
type Runtime interface {
	ContainerMetrics(ctx context.Context) ([]runtime.ContainerMetrics, error)
}

// Config configures a Collector.
type Config struct {
	// NodeName is reported as the Summary's node name. Required.
	NodeName string
	// Runtime is read for the containers' usage. Required.
	Runtime Runtime
	// Interval between samples (DefaultInterval when zero). One sample may
	// take at most this long.
	Interval time.Duration
	// ProcRoot is the proc file system the node's CPU, memory and boot
	// time are read from (DefaultProcRoot when empty; tests fake it).
	ProcRoot string
	// Now is the clock stamping the node's samples (time.Now when nil).
	// Container samples carry the runtime's own timestamps.
	Now func() time.Time
	Log *slog.Logger
	// Volumes is measured for the pods' volume entries every
	// VolumeInterval (DefaultVolumeInterval when zero); nil: none.
	Volumes        Volumes
	VolumeInterval time.Duration
	// VolumeMetrics, if set, gets each measurement of claim volumes.
	VolumeMetrics VolumeMetrics
}

// Collector samples the node and its containers and publishes the last
// two samples. Its methods are safe for concurrent use.
type Collector struct {
	cfg      Config
	sampleMu sync.Mutex // serializes Sample
	state    atomic.Pointer[snapshot]
	volumes  atomic.Pointer[map[types.UID][]statsv1alpha1.VolumeStats]
	handler  http.Handler
}

// snapshot is the result of the samples so far; it is never modified once
// published.
type snapshot struct {
	node, prevNode *nodeSample // prevNode: the sample before node, or nil
	containers     map[string]window
	// err is why the last sample failed, in part or whole (nil if it
	// succeeded); what failed keeps its previous values.
	err error
}

// window is the latest and the previous sample of one container instance.
type window struct {
	cur  runtime.ContainerMetrics
	prev *runtime.ContainerMetrics // nil until the container was sampled twice
}

// New returns a collector that has sampled nothing yet; Run (or Sample)
// takes the samples.
func New(cfg Config) (*Collector, error) {
	if cfg.NodeName == "" {
		return nil, errors.New("stats: Config.NodeName is required")
	}
	if cfg.Runtime == nil {
		return nil, errors.New("stats: Config.Runtime is required")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = DefaultProcRoot
	}
	if cfg.VolumeInterval <= 0 {
		cfg.VolumeInterval = DefaultVolumeInterval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	c := &Collector{cfg: cfg}
	c.state.Store(&snapshot{containers: map[string]window{}, err: errNoSample})
	h, err := newResourceMetricsHandler(c)
	if err != nil {
		return nil, err
	}
	c.handler = h
	return c, nil
}

// Run samples at once and then every Interval until ctx ends, and returns
// nil then. A failed sample is logged; the next one tries again.
func (c *Collector) Run(ctx context.Context) error {
	if c.cfg.Volumes != nil {
		done := make(chan struct{})
		defer func() { <-done }()
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() { defer close(done); c.runVolumes(ctx) }()
	}
	ticker := time.NewTicker(c.cfg.Interval)
	defer ticker.Stop()
	for {
		c.sampleBounded(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// sampleBounded takes one sample that may last at most one interval.
func (c *Collector) sampleBounded(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Interval)
	defer cancel()
	if err := c.Sample(ctx); err != nil && ctx.Err() == nil {
		c.cfg.Log.Warn("stats: sample failed", "err", err)
	}
}

// Sample reads the node and the runtime once and publishes the result:
// the previous sample becomes the start of each rate's window. Containers
// the runtime no longer lists drop out. When the node or the runtime
// cannot be read, its previous sample stays published (its timestamps show
// its age), the error is returned and the resource metrics report a scrape
// error until a sample succeeds.
func (c *Collector) Sample(ctx context.Context) error {
	c.sampleMu.Lock()
	defer c.sampleMu.Unlock()
	old := c.state.Load()
	next := &snapshot{node: old.node, prevNode: old.prevNode, containers: old.containers}
	var errs []error
	if node, err := readNode(c.cfg.ProcRoot, c.cfg.Now()); err != nil {
		errs = append(errs, err)
	} else {
		next.node, next.prevNode = node, old.node
	}
	list, err := c.cfg.Runtime.ContainerMetrics(ctx)
	if err != nil {
		errs = append(errs, fmt.Errorf("stats: read container metrics: %w", err))
	} else {
		next.containers = advance(old.containers, list, c.cfg.Now())
	}
	next.err = errors.Join(errs...)
	c.state.Store(next)
	return next.err
}

// advance makes the windows of a new container sample: each container's
// previous latest sample becomes its window's start. A reading no newer
// than the one held (the runtime answered from a cache) leaves the window
// as it was. Readings without a timestamp are stamped now.
func advance(old map[string]window, list []runtime.ContainerMetrics, now time.Time) map[string]window {
	next := make(map[string]window, len(list))
	for _, m := range list {
		if m.Timestamp.IsZero() {
			m.Timestamp = now
		}
		o, seen := old[m.ID]
		switch {
		case !seen:
			next[m.ID] = window{cur: m}
		case !m.Timestamp.After(o.cur.Timestamp):
			next[m.ID] = o
		default:
			prev := o.cur
			next[m.ID] = window{cur: m, prev: &prev}
		}
	}
	return next
}

// rate is the CPU rate in nanocores (ns of CPU time per s) between two
// readings of a cumulative counter, or nil when there is no window (no
// elapsed time, or the counter went backwards).
func rate(prevNanos, curNanos uint64, from, to time.Time) *uint64 {
	elapsed := to.Sub(from)
	if elapsed <= 0 || curNanos < prevNanos {
		return nil
	}
	r := uint64(float64(curNanos-prevNanos) / elapsed.Seconds())
	return &r
}

// cpuRate is the container's CPU rate over its window, or nil.
func (w window) cpuRate() *uint64 {
	if w.prev == nil {
		return nil
	}
	return rate(w.prev.CPUUsageNanoseconds, w.cur.CPUUsageNanoseconds, w.prev.Timestamp, w.cur.Timestamp)
}

// ResourceMetricsHandler serves the resource metrics in the Prometheus
// text format, as the kubelet's /metrics/resource (see
// resource_metrics.go).
func (c *Collector) ResourceMetricsHandler() http.Handler { return c.handler }
