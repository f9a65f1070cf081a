package pleg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/runtime"
)

// ErrUnhealthy is wrapped by Healthy's error.
var ErrUnhealthy = errors.New("pleg: not healthy")

// Upstream's defaults.
const (
	DefaultPeriod          = time.Second
	DefaultRelistThreshold = 3 * time.Minute
	DefaultCapacity        = 1000
)

// Config configures a PLEG.
type Config struct {
	// List returns the runtime status of every pod on the node. Required.
	List func(ctx context.Context) ([]runtime.PodStatus, error)
	// Events, optional, carries hints from the runtime's event stream: each
	// triggers an immediate relist (hints received meanwhile coalesce).
	Events <-chan struct{}
	// Period between relists (default 1s).
	Period time.Duration
	// RelistThreshold: Healthy fails when the last successful relist is
	// older (default 3m).
	RelistThreshold time.Duration
	// Capacity of the event channel (default 1000); when it is full events
	// are dropped and counted, and the pod worker's periodic resync catches
	// up.
	Capacity int
	// Clock (default: the real clock).
	Clock clock.Clock
	Log   *slog.Logger
	// Metrics, optional, receives what the relists measure
	// (*kubeletmetrics.Metrics).
	Metrics Metrics
}

// Metrics receives the PLEG's measurements, upstream's kubelet_pleg_* and
// kubelet_running_* metrics.
type Metrics interface {
	// ObserveRelist is told of every relist, failed ones too: how long it
	// took and the time since the previous successful one started (0 when
	// there was none).
	ObserveRelist(took, interval time.Duration)
	// ObserveRuntimePods is told, after each successful relist started at
	// ts, how many pods have a running sandbox and how many containers are
	// in each state (runtime.State spelled as a string).
	ObserveRuntimePods(ts time.Time, runningPods int, containers map[string]int)
	// DiscardedEvent is told of each event dropped on a full channel.
	DiscardedEvent()
}

// PLEG generates pod lifecycle events by relisting the runtime.
type PLEG struct {
	cfg    Config
	events chan Event
	cache  *Cache

	dropped    atomic.Uint64
	relistTime atomic.Pointer[time.Time]

	// records are the pods of the last successful relist; mu serializes
	// relists.
	mu      sync.Mutex
	records map[types.UID]*runtime.PodStatus
}

// New returns a PLEG; Run starts it.
func New(cfg Config) (*PLEG, error) {
	if cfg.List == nil {
		return nil, errors.New("pleg: Config.List is required")
	}
	if cfg.Period <= 0 {
		cfg.Period = DefaultPeriod
	}
	if cfg.RelistThreshold <= 0 {
		cfg.RelistThreshold = DefaultRelistThreshold
	}
	if cfg.Capacity <= 0 {
		cfg.Capacity = DefaultCapacity
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &PLEG{cfg: cfg, events: make(chan Event, cfg.Capacity), cache: NewCache(),
		records: map[types.UID]*runtime.PodStatus{}}, nil
}

// Watch returns the event channel (one consumer).
func (p *PLEG) Watch() <-chan Event { return p.events }

// Cache returns the cache of runtime statuses the relists keep up to date.
func (p *PLEG) Cache() *Cache { return p.cache }

// Dropped returns how many events were dropped because the channel was full.
func (p *PLEG) Dropped() uint64 { return p.dropped.Load() }

// Run relists at once, then every Period and on every runtime hint, until
// ctx ends. A failed relist is logged and retried at the next period.
func (p *PLEG) Run(ctx context.Context) error {
	hints := p.cfg.Events
	for {
		if err := p.Relist(ctx); err != nil && ctx.Err() == nil {
			p.cfg.Log.Warn("pleg relist failed", "err", err)
		}
		t := p.cfg.Clock.NewTimer(p.cfg.Period)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		case _, ok := <-hints:
			if !ok {
				hints = nil // the event stream ended: relist by period only
			}
			t.Stop()
		}
	}
}

// Relist lists the runtime's pods once, updates the cache and sends the
// events of what changed since the last successful relist.
func (p *PLEG) Relist(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	ts := p.cfg.Clock.Now()
	if m := p.cfg.Metrics; m != nil {
		var interval time.Duration
		if last := p.relistTime.Load(); last != nil {
			interval = ts.Sub(*last)
		}
		defer func() { m.ObserveRelist(p.cfg.Clock.Since(ts), interval) }()
	}
	pods, err := p.cfg.List(ctx)
	if err != nil {
		return fmt.Errorf("pleg: list pods: %w", err)
	}
	p.relistTime.Store(&ts)
	if m := p.cfg.Metrics; m != nil {
		running, containers := countRuntimePods(pods)
		m.ObserveRuntimePods(ts, running, containers)
	}

	cur := make(map[types.UID]*runtime.PodStatus, len(pods))
	for i := range pods {
		cur[pods[i].UID] = &pods[i]
	}
	var events []Event
	for uid, st := range cur {
		events = append(events, computeEvents(uid, p.records[uid], st)...)
		p.cache.Set(uid, st, ts)
	}
	for uid, old := range p.records {
		if _, ok := cur[uid]; !ok {
			events = append(events, computeEvents(uid, old, nil)...)
			p.cache.Delete(uid)
		}
	}
	p.cache.UpdateTime(ts)
	p.records = cur
	// Events go out after the cache is updated, so that a consumer finds a
	// status at least as new as the event.
	for _, e := range events {
		select {
		case p.events <- e:
		default:
			if p.cfg.Metrics != nil {
				p.cfg.Metrics.DiscardedEvent()
			}
			if p.dropped.Add(1)%100 == 1 {
				p.cfg.Log.Warn("pleg event channel full, dropping events", "dropped", p.dropped.Load())
			}
		}
	}
	return nil
}

// countRuntimePods counts the pods with a running sandbox and the
// containers by state, as upstream's kubelet_running_pods and
// kubelet_running_containers.
func countRuntimePods(pods []runtime.PodStatus) (running int, containers map[string]int) {
	containers = map[string]int{}
	for i := range pods {
		for _, c := range pods[i].Containers {
			containers[string(c.State)]++
		}
		for _, sb := range pods[i].Sandboxes {
			if sb.State == runtime.StateRunning {
				running++
				break
			}
		}
	}
	return running, containers
}

// Healthy reports false (with an error wrapping ErrUnhealthy) before the
// first successful relist and when the last one is older than
// RelistThreshold.
func (p *PLEG) Healthy() (bool, error) {
	last := p.relistTime.Load()
	if last == nil {
		return false, fmt.Errorf("%w: pleg has yet to be successful", ErrUnhealthy)
	}
	if since := p.cfg.Clock.Since(*last); since > p.cfg.RelistThreshold {
		return false, fmt.Errorf("%w: pleg was last seen active %v ago; threshold is %v", ErrUnhealthy, since, p.cfg.RelistThreshold)
	}
	return true, nil
}
