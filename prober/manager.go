// Package prober runs the liveness, readiness and startup probes of the
// pods' containers, as upstream kubelet's prober: one worker goroutine per
// probe of each running container instance, its results kept per
// instance, and events for failed probes.
//
// The caller (the pod sync) tells the manager what runs with UpdatePod on
// every sync and RemovePod when the pod is gone; it reads the results with
// Results (for the pod plan: a container whose liveness or startup probe
// failed is killed) or Readiness and Startup (for the status). Updates
// names the pod whenever one of its results changes, so it syncs now.
package prober

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// Config configures a Manager. All fields are optional.
type Config struct {
	// Exec runs the command of exec probes in a container; without it
	// exec probes error (and their results are thrown away).
	Exec ExecFunc
	// Dial opens the connections of HTTP, TCP and gRPC probes (default: a
	// net.Dialer with upstream's SO_LINGER of 1s).
	Dial DialFunc
	// HTTPTransport replaces the transport of HTTP probes (default:
	// upstream's, dialing with Dial: no proxy, no keep-alive, no
	// compression, certificates not verified).
	HTTPTransport http.RoundTripper
	// UserAgent of HTTP probes without their own and of gRPC probes
	// (default DefaultUserAgent).
	UserAgent string
	// Clock times the probes (default: the real clock).
	Clock clock.WithTicker
	Log   *slog.Logger
	// Recorder records upstream's events about a container of the pod
	// (upstream's involvedObject is the container, fieldPath
	// spec.containers{name}): Warning "Unhealthy" "Liveness probe failed:
	// ...", "Readiness probe errored and resulted in unknown state: ...",
	// Warning "ProbeWarning" "Readiness probe warning: ...". Called from
	// worker goroutines, for every failed probe (the recorder aggregates).
	Recorder func(pod *corev1.Pod, container, eventtype, reason, message string)
	// Metrics, optional, counts and times the probes
	// (*kubeletmetrics.Metrics).
	Metrics Metrics
}

// Metrics receives upstream's prober_probe_total and
// prober_probe_duration_seconds measurements.
type Metrics interface {
	// ObserveProbe is told of every probe that ran (not of one that
	// errored, which is thrown away), before thresholds: probeType is the
	// ProbeType's String ("Liveness"), result "successful" (a warning
	// too), "failed" or "unknown", as upstream's metric spells them.
	// Called from worker goroutines.
	ObserveProbe(pod *corev1.Pod, container, probeType, result string, took time.Duration)
	// ForgetProbes is told that the pod was removed: its series can go.
	ForgetProbes(uid types.UID)
}

// Manager runs the probes of the pods' running containers.
type Manager struct {
	cfg   Config
	clock clock.WithTicker
	h     *handlers
	// ctx is the parent of the workers' contexts; Stop cancels it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// spawn starts a worker's goroutine (tests drive workers themselves).
	spawn func(ctx context.Context, w *worker)
	// updates carries the pods whose results changed (Updates).
	updates chan types.UID

	mu      sync.Mutex
	stopped bool
	pods    map[types.UID]*podState
	byID    map[string]*entry // by container ID without scheme
}

// New returns a Manager; it starts workers as UpdatePod finds running
// containers with probes, and Stop stops them all.
func New(cfg Config) *Manager {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = DefaultUserAgent
	}
	if cfg.Dial == nil {
		cfg.Dial = defaultDial()
	}
	if cfg.HTTPTransport == nil {
		cfg.HTTPTransport = newHTTPTransport(cfg.Dial)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{
		cfg:   cfg,
		clock: cfg.Clock,
		h: &handlers{
			exec:      cfg.Exec,
			dial:      cfg.Dial,
			transport: cfg.HTTPTransport,
			userAgent: cfg.UserAgent,
			record:    cfg.Recorder,
			log:       cfg.Log,
		},
		ctx:     ctx,
		cancel:  cancel,
		updates: make(chan types.UID, updatesBuffer),
		pods:    make(map[types.UID]*podState),
		byID:    make(map[string]*entry),
	}
	m.spawn = func(ctx context.Context, w *worker) {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			w.run(ctx)
		}()
	}
	return m
}

// updatesBuffer lets workers report bursts of changes without waiting for
// the reader.
const updatesBuffer = 64

// Updates receives the UID of a pod when one of its probe results changes
// (readiness, liveness or startup passing its threshold), so that the pod
// syncs now rather than at its next resync. Changes made by UpdatePod and
// RemovePod themselves are not sent. The caller must keep reading it until
// Stop, which closes it: a worker whose report finds the channel full
// waits for the reader.
func (m *Manager) Updates() <-chan types.UID { return m.updates }

// UpdatePod makes the pod's workers match its running containers: podIP
// (default pod.Status.PodIP) is the host of its probes, containers its
// containers as the runtime reports them (the newest instance first when
// a name appears more than once; only running instances count). It is
// meant to be called on every sync of the pod, before the pod's actions
// and status are computed from Results.
//
// A running container (an app container, or an init container with
// restartPolicy Always) gets a worker per probe; an instance with a new ID
// gets new workers and fresh results; workers of containers that are no
// longer running stop and their results are dropped. Once the pod is
// being deleted its liveness and startup probes stop and count as
// succeeded (a quiet shutdown), while readiness keeps probing. The pod is
// kept and must not be modified afterwards.
func (m *Manager) UpdatePod(pod *corev1.Pod, podIP string, containers []ContainerState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return
	}
	ps := m.pods[pod.UID]
	if ps == nil {
		ps = &podState{containers: make(map[string]*entry)}
		m.pods[pod.UID] = ps
	}
	ps.pod = pod
	ps.ip = podIP
	if ps.ip == "" {
		ps.ip = pod.Status.PodIP
	}
	running := make(map[string]ContainerState, len(containers))
	for _, cs := range containers {
		if _, dup := running[cs.Name]; !dup && cs.Running && cs.ID != "" {
			running[cs.Name] = cs
		}
	}
	for name, e := range ps.containers {
		if cs, ok := running[name]; !ok || trimID(cs.ID) != e.id {
			m.dropLocked(ps, e)
		}
	}
	for name, cs := range running {
		c, sidecar := findContainer(pod, name)
		if c == nil {
			continue
		}
		e := ps.containers[name]
		if e == nil {
			e = newEntry(pod.UID, c, sidecar, cs, m.clock.Now())
			ps.containers[name] = e
			m.byID[e.id] = e
		}
		if pod.DeletionTimestamp != nil {
			quiesceLocked(e)
		}
		m.startWorkersLocked(e)
	}
	if len(ps.containers) == 0 {
		delete(m.pods, pod.UID)
	}
}

// RemovePod stops the pod's workers and forgets its results.
func (m *Manager) RemovePod(podUID types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ps := m.pods[podUID]; ps != nil {
		for _, e := range ps.containers {
			m.dropLocked(ps, e)
		}
		delete(m.pods, podUID)
	}
	if m.cfg.Metrics != nil {
		m.cfg.Metrics.ForgetProbes(podUID)
	}
}

// Stop stops every worker and waits for their goroutines to end; later
// UpdatePod calls do nothing, and so do later Stop calls.
func (m *Manager) Stop() {
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return
	}
	m.stopped = true
	for uid, ps := range m.pods {
		for _, e := range ps.containers {
			m.dropLocked(ps, e)
		}
		delete(m.pods, uid)
	}
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
	close(m.updates) // only workers send, and they are gone
}

// startWorkersLocked starts the instance's missing workers (once only,
// for liveness and startup, which stop for good after a failure or once
// the pod is being deleted).
func (m *Manager) startWorkersLocked(e *entry) {
	for t := ProbeType(0); t < numProbeTypes; t++ {
		if !e.has[t] || e.spawned[t] {
			continue
		}
		e.spawned[t] = true
		w := newWorker(m, e, t)
		ctx, cancel := context.WithCancel(m.ctx)
		w.cancel = cancel
		e.owner[t] = w
		m.spawn(ctx, w)
	}
}

// dropLocked stops the workers of an instance and forgets its results.
func (m *Manager) dropLocked(ps *podState, e *entry) {
	for t := range e.owner {
		if w := e.owner[t]; w != nil {
			w.stop()
			e.owner[t] = nil
		}
	}
	delete(ps.containers, e.container.Name)
	if m.byID[e.id] == e {
		delete(m.byID, e.id)
	}
}

// quiesceLocked stops the liveness and startup probes of a container of a
// pod being deleted, and counts them as succeeded, as upstream does.
func quiesceLocked(e *entry) {
	for _, t := range []ProbeType{Liveness, Startup} {
		e.spawned[t] = true // none to start
		if w := e.owner[t]; w != nil {
			w.stop()
			e.owner[t] = nil
		}
		if e.has[t] {
			e.value[t] = Success
		}
	}
}

// findContainer returns the pod's container (or restartable init
// container, a sidecar) named name.
func findContainer(pod *corev1.Pod, name string) (c *corev1.Container, sidecar bool) {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i], false
		}
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.Name == name && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			return c, true
		}
	}
	return nil, false
}
