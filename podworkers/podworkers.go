// Package podworkers runs one goroutine per pod UID, as upstream's
// kubelet pod_workers.go, much smaller. The contract:
//
//   - Operations on one pod are serialized; different pods proceed in
//     parallel.
//   - Updates that arrive while a pod is busy collapse to the latest (a
//     size-1, latest-wins slot): the worker never replays stale specs.
//   - Each call gets its own cancellable context. A Kill cancels an
//     in-progress SyncPod; a Kill with a shorter grace period cancels an
//     in-progress SyncTerminatingPod so it restarts with the shorter one.
//   - A pod goes SyncPod* -> SyncTerminatingPod (until it returns nil; the
//     pod is then terminated and SyncPod is never called again for its UID)
//     -> SyncTerminatedPod (cleanup, until it returns nil) -> the worker
//     exits and forgets the UID.
//   - A failed call is retried with the same work after a backoff (sooner if
//     a new update arrives); a running pod is re-synced every ResyncInterval.
//   - Shutdown stops the workers and never kills pods.
package podworkers

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// ErrPodFinished, wrapped in SyncPod's error, says that the pod reached a
// terminal phase (all its containers stopped and none will restart): the
// worker then terminates it as if it were killed, and never syncs it again.
var ErrPodFinished = errors.New("pod finished")

// Syncer does the work for one pod. It is implemented by the nodelet; the
// pod workers call it, never two calls for one pod at a time.
type Syncer interface {
	// SyncPod makes the pod run as its spec says. It is called again after
	// every update and every ResyncInterval while the pod runs. ctx is
	// cancelled when the pod is killed meanwhile. An error wrapping
	// ErrPodFinished ends the pod's syncing (see ErrPodFinished).
	SyncPod(ctx context.Context, pod *corev1.Pod) error
	// SyncTerminatingPod stops every container of the pod within
	// gracePeriod seconds. Once it returns nil the pod is terminated.
	SyncTerminatingPod(ctx context.Context, pod *corev1.Pod, gracePeriod int64) error
	// SyncTerminatedPod releases what the stopped pod still holds (network,
	// cgroup, directories). Once it returns nil the worker forgets the pod.
	SyncTerminatedPod(ctx context.Context, pod *corev1.Pod) error
}

// Kind is what an update asks for.
type Kind int

const (
	// Sync: the pod should run as its (new) spec says. A pod with a
	// deletionTimestamp or a terminal API phase is killed instead.
	Sync Kind = iota
	// Kill: stop the pod (API deletion, eviction, a terminal phase).
	Kill
	// Remove: the pod is gone from the API (deleted, or an orphan found in
	// the runtime): kill it if needed, then its content may be removed.
	Remove
)

func (k Kind) String() string {
	switch k {
	case Sync:
		return "sync"
	case Kill:
		return "kill"
	case Remove:
		return "remove"
	}
	return "unknown"
}

// UpdateOptions is one update for one pod.
type UpdateOptions struct {
	// Pod is the latest pod object. For an orphan only UID, name and
	// namespace need be set.
	Pod  *corev1.Pod
	Kind Kind
	// GracePeriod for Kill and Remove, in seconds; nil takes the pod's
	// deletionGracePeriodSeconds, else its terminationGracePeriodSeconds,
	// else 30. A grace period only ever shrinks.
	GracePeriod *int64
}

// Config configures the pod workers.
type Config struct {
	Syncer Syncer
	Log    *slog.Logger
	// ResyncInterval re-syncs running pods (default 10s); it also caps the
	// error backoff.
	ResyncInterval time.Duration
	// BackoffBase is the first delay after a failed call (default 1s); it
	// doubles on each consecutive failure up to ResyncInterval.
	BackoffBase time.Duration
	// Clock (default: the real clock); tests pass a fake one.
	Clock clock.Clock
}

// phase of a pod's worker.
type phase int

const (
	phaseSyncing     phase = iota // SyncPod until termination is requested
	phaseTerminating              // SyncTerminatingPod until it returns nil
	phaseTerminated               // SyncTerminatedPod until it returns nil
)

// worker is the state of one pod; guarded by Workers.mu.
type worker struct {
	uid   types.UID
	pod   *corev1.Pod
	phase phase
	// killRequested: a Kill/Remove (or a deleted/finished pod) was seen.
	killRequested bool
	gracePeriod   int64
	// removed: the pod is gone from the API.
	removed bool
	// wake is the latest-wins signal: a pending update exists.
	wake chan struct{}
	// running is the call in progress (if any) and its cancel function.
	running  phase
	busy     bool
	cancel   context.CancelFunc
	failures int
	// syncAfter, when set, shortens the wait after the current SyncPod.
	syncAfter time.Duration
}

// Workers dispatches pod updates to per-pod goroutines.
type Workers struct {
	cfg Config
	ctx context.Context
	// stop cancels every worker and every call in progress.
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu      sync.Mutex
	workers map[types.UID]*worker
	// finished holds pods whose worker is done but whose API object still
	// exists: updates for them are ignored until Remove (never SyncPod
	// again for a terminated UID).
	finished map[types.UID]bool
	shutdown bool
}

// New returns pod workers; call Shutdown to stop them.
func New(cfg Config) *Workers {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.ResyncInterval <= 0 {
		cfg.ResyncInterval = 10 * time.Second
	}
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = time.Second
	}
	if cfg.BackoffBase > cfg.ResyncInterval {
		cfg.BackoffBase = cfg.ResyncInterval
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Workers{cfg: cfg, ctx: ctx, stop: cancel,
		workers: map[types.UID]*worker{}, finished: map[types.UID]bool{}}
}

// Update hands an update to the pod's worker, starting one if needed. It
// never blocks on the worker.
func (w *Workers) Update(opts UpdateOptions) {
	if opts.Pod == nil {
		return
	}
	uid := opts.Pod.UID
	kind := opts.Kind
	if kind == Sync && (opts.Pod.DeletionTimestamp != nil || terminalPhase(opts.Pod.Status.Phase)) {
		kind = Kill
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.shutdown {
		return
	}
	if w.finished[uid] {
		if kind == Remove {
			delete(w.finished, uid)
		}
		return
	}
	wk, ok := w.workers[uid]
	if !ok {
		wk = &worker{uid: uid, wake: make(chan struct{}, 1)}
		w.workers[uid] = wk
		w.wg.Add(1)
		go w.loop(wk)
	}
	wk.pod = opts.Pod
	if kind == Remove {
		wk.removed = true
	}
	if kind != Sync {
		w.requestKill(wk, gracePeriod(opts))
	}
	select {
	case wk.wake <- struct{}{}:
	default:
	}
}

// requestKill marks the pod for termination and cancels a call that the
// kill makes stale. Caller holds w.mu.
func (w *Workers) requestKill(wk *worker, grace int64) {
	first := !wk.killRequested
	shorter := !first && grace < wk.gracePeriod
	if first || shorter {
		wk.gracePeriod = grace
	}
	wk.killRequested = true
	if !wk.busy || wk.cancel == nil {
		return
	}
	if wk.running == phaseSyncing || (wk.running == phaseTerminating && shorter) {
		wk.cancel()
	}
}

func gracePeriod(opts UpdateOptions) int64 {
	switch {
	case opts.GracePeriod != nil:
		return max(*opts.GracePeriod, 0)
	case opts.Pod.DeletionGracePeriodSeconds != nil:
		return max(*opts.Pod.DeletionGracePeriodSeconds, 0)
	case opts.Pod.Spec.TerminationGracePeriodSeconds != nil:
		return max(*opts.Pod.Spec.TerminationGracePeriodSeconds, 0)
	}
	return corev1.DefaultTerminationGracePeriodSeconds
}

func terminalPhase(p corev1.PodPhase) bool {
	return p == corev1.PodSucceeded || p == corev1.PodFailed
}

// SyncAfter asks for the pod's next sync within d instead of the resync
// interval (the end of a crash back-off, say). It is meant to be called
// from within SyncPod and takes effect when that call returns; the
// earliest request wins. The wait is the worker's own, so Shutdown ends it
// and nothing outlives the workers.
func (w *Workers) SyncAfter(uid types.UID, d time.Duration) {
	if d <= 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if wk, ok := w.workers[uid]; ok && (wk.syncAfter == 0 || d < wk.syncAfter) {
		wk.syncAfter = d
	}
}

// IsTerminated reports whether the pod's SyncTerminatingPod returned nil
// (its containers are stopped for good). Unknown pods are not terminated.
func (w *Workers) IsTerminated(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.finished[uid] {
		return true
	}
	wk, ok := w.workers[uid]
	return ok && wk.phase >= phaseTerminated
}

// IsTerminationRequested reports whether the pod is being or was killed.
func (w *Workers) IsTerminationRequested(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.finished[uid] {
		return true
	}
	wk, ok := w.workers[uid]
	return ok && wk.killRequested
}

// ShouldPodContentBeRemoved reports whether the pod's content (logs,
// directories) may be removed: it is terminated and gone from the API, or
// the workers do not know it at all (never seen, or fully cleaned up and
// removed). A terminated pod still in the API keeps its content.
func (w *Workers) ShouldPodContentBeRemoved(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.finished[uid] {
		return false
	}
	wk, ok := w.workers[uid]
	if !ok {
		return true
	}
	return wk.removed && wk.phase >= phaseTerminated
}

// Known returns the UIDs that have a worker (running or terminating).
func (w *Workers) Known() []types.UID {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]types.UID, 0, len(w.workers))
	for uid := range w.workers {
		out = append(out, uid)
	}
	return out
}

// Shutdown stops every worker and waits for them. Calls in progress see
// their context cancelled; pods are left running (a nodelet shutdown
// never kills pods). Later updates are ignored.
func (w *Workers) Shutdown() {
	w.mu.Lock()
	w.shutdown = true
	w.mu.Unlock()
	w.stop()
	w.wg.Wait()
}
