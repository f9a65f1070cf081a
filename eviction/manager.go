package eviction

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Upstream's wait for an evicted pod's cleanup before the next pass.
const (
	podCleanupTimeout  = 30 * time.Second
	podCleanupPollFreq = time.Second
)

// Config configures a Manager. The measurements and actions are function
// dependencies so that the manager runs on a fake node in tests.
type Config struct {
	// Thresholds to enforce (see ParseStatements, Combine); none: the
	// manager only measures.
	Thresholds []Threshold
	// PressureTransitionPeriod: DefaultPressureTransitionPeriod when 0.
	PressureTransitionPeriod time.Duration
	// MaxPodGracePeriod caps the grace period of soft evictions, in
	// seconds (--eviction-max-pod-grace-period; upstream's default 0).
	MaxPodGracePeriod int64
	// Interval between passes: DefaultMonitoringInterval when 0.
	Interval time.Duration

	// Observe measures the signals (Host.Observe).
	Observe func() (Observations, error)
	// ActivePods are the pods that may be evicted: admitted, not
	// terminating.
	ActivePods func() []*corev1.Pod
	// PodStats measures pods for the ranking of res (PodStatsReader.Read).
	PodStats func(pods []*corev1.Pod, res corev1.ResourceName) map[types.UID]PodStats
	// RemoveDeadContainers and RemoveUnusedImages reclaim disk before any
	// pod is evicted (upstream's node-level reclaim); nil: not available.
	// DedicatedImageFS says the images live on another filesystem than the
	// nodelet's root: then only imagefs pressure removes them.
	RemoveDeadContainers, RemoveUnusedImages func(ctx context.Context) error
	DedicatedImageFS                         bool
	// Evict kills the pod with the eviction's grace period and makes its
	// status Failed/Evicted (Eviction.Status); it returns once the kill is
	// requested.
	Evict func(ctx context.Context, e Eviction) error
	// PodCleanedUp, optional, tells when an evicted pod's resources are
	// released; the next pass waits for it (at most 30 s), as upstream.
	PodCleanedUp func(*corev1.Pod) bool
	// Published receives the pressure conditions (a new NodePressure when
	// nil; see Manager.Published).
	Published *NodePressure
	// OnEvict, optional, counts evictions by signal (the metric
	// kubelet_evictions{eviction_signal}).
	OnEvict func(signal string)
	// Event, optional, records an event about the node
	// (EvictionThresholdMet).
	Event func(eventtype, reason, message string)
	Now   func() time.Time // time.Now when nil
	Log   *slog.Logger
}

// Manager runs the eviction passes and publishes the node's pressure.
type Manager struct {
	cfg      Config
	log      *slog.Logger
	state    State // owned by the Run goroutine
	lastErr  string
	pressure *NodePressure
}

// New checks cfg and fills in defaults.
func New(cfg Config) (*Manager, error) {
	if cfg.Observe == nil || cfg.ActivePods == nil || cfg.PodStats == nil || cfg.Evict == nil {
		return nil, errors.New("eviction: Observe, ActivePods, PodStats and Evict are required")
	}
	if cfg.MaxPodGracePeriod < 0 {
		return nil, fmt.Errorf("eviction: max pod grace period %d is negative", cfg.MaxPodGracePeriod)
	}
	if cfg.PressureTransitionPeriod == 0 {
		cfg.PressureTransitionPeriod = DefaultPressureTransitionPeriod
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultMonitoringInterval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Published == nil {
		cfg.Published = NewNodePressure()
	}
	return &Manager{cfg: cfg, log: cfg.Log, pressure: cfg.Published}, nil
}

// Published is where the manager publishes the node's pressure.
func (m *Manager) Published() *NodePressure { return m.pressure }

// Run makes a pass every Interval until ctx ends; after an eviction the
// next pass comes as soon as the pod is cleaned up.
func (m *Manager) Run(ctx context.Context) error {
	m.log.Info("eviction manager started", "thresholds", len(m.cfg.Thresholds), "interval", m.cfg.Interval)
	for {
		wait := m.cfg.Interval
		if e := m.Synchronize(ctx); e != nil && m.cfg.PodCleanedUp != nil {
			m.waitCleanup(ctx, e.Pod)
			wait = 0
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

func (m *Manager) waitCleanup(ctx context.Context, pod *corev1.Pod) {
	deadline := time.After(podCleanupTimeout)
	tick := time.NewTicker(podCleanupPollFreq)
	defer tick.Stop()
	for !m.cfg.PodCleanedUp(pod) {
		select {
		case <-ctx.Done():
			return
		case <-deadline:
			m.log.Info("timed out waiting for the evicted pod's cleanup", "pod", pod.Namespace+"/"+pod.Name)
			return
		case <-tick.C:
		}
	}
}

// Synchronize is one pass: measure, plan, publish the conditions, and if
// a threshold calls for it reclaim node-level resources, measure again and
// evict at most one pod. It returns the eviction made, if any.
func (m *Manager) Synchronize(ctx context.Context) *Eviction {
	obs := m.observe()
	d := Plan(Inputs{Now: m.cfg.Now(), Thresholds: m.cfg.Thresholds, Observations: obs,
		TransitionPeriod: m.cfg.PressureTransitionPeriod}, m.state)
	m.state = d.Next
	m.publish(d.Conditions)
	t, ok := d.Reclaim()
	if !ok {
		return nil
	}
	res := signalResource[t.Signal]
	m.log.Info("eviction threshold met, attempting to reclaim", "signal", t.Signal, "resource", res,
		"available", obs[t.Signal].Available, "threshold", t.Value.amount(obs[t.Signal].Capacity))
	if m.cfg.Event != nil {
		m.cfg.Event(corev1.EventTypeWarning, "EvictionThresholdMet", "Attempting to reclaim "+string(res))
	}
	if m.reclaimNodeLevel(ctx, t.Signal) {
		m.log.Info("resource pressure reduced without evicting pods", "resource", res)
		return nil
	}
	pods := m.cfg.ActivePods()
	if len(pods) == 0 {
		m.log.Info("eviction thresholds met, but no pods are active to evict", "signal", t.Signal)
		return nil
	}
	e, ok := Victim(t, d.Act, obs, pods, m.cfg.PodStats(pods, res), m.cfg.MaxPodGracePeriod)
	if !ok {
		m.log.Info("unable to evict any pod: only critical pods are left", "signal", t.Signal)
		return nil
	}
	if err := m.cfg.Evict(ctx, e); err != nil {
		m.log.Error("evict pod", "pod", e.Pod.Namespace+"/"+e.Pod.Name, "err", err)
		return nil
	}
	m.log.Info("pod evicted", "pod", e.Pod.Namespace+"/"+e.Pod.Name, "signal", t.Signal,
		"gracePeriod", e.GracePeriod, "message", e.Message)
	if m.cfg.OnEvict != nil {
		m.cfg.OnEvict(string(t.Signal))
	}
	return &e
}

// observe measures; a failure repeated pass after pass is logged once.
func (m *Manager) observe() Observations {
	obs, err := m.cfg.Observe()
	switch {
	case err != nil && err.Error() != m.lastErr:
		m.log.Warn("eviction signals measured in part", "err", err)
		m.lastErr = err.Error()
	case err == nil:
		m.lastErr = ""
	}
	return obs
}

func (m *Manager) publish(conds []corev1.NodeConditionType) {
	if m.pressure.set(conds) {
		m.log.Info("node pressure conditions", "conditions", conds)
	}
}

// reclaimNodeLevel runs the signal's node-level reclaim (upstream's
// signalToNodeReclaimFuncs) and reports whether, measured again, no
// threshold is met any more (minimum reclaims counted), so no pod need go.
func (m *Manager) reclaimNodeLevel(ctx context.Context, s Signal) bool {
	funcs := m.reclaimFuncs(s)
	if len(funcs) == 0 {
		return false
	}
	for _, f := range funcs {
		if err := f(ctx); err != nil {
			m.log.Warn("node-level reclaim", "signal", s, "err", err)
		}
	}
	return !StillMet(m.cfg.Thresholds, m.observe())
}

func (m *Manager) reclaimFuncs(s Signal) []func(context.Context) error {
	var out []func(context.Context) error
	switch s {
	case NodeFSAvailable, NodeFSInodesFree:
		if m.cfg.DedicatedImageFS {
			return nil // images and containers live elsewhere
		}
	case ImageFSAvailable, ImageFSInodesFree:
	default:
		return nil
	}
	for _, f := range []func(context.Context) error{m.cfg.RemoveDeadContainers, m.cfg.RemoveUnusedImages} {
		if f != nil {
			out = append(out, f)
		}
	}
	return out
}
