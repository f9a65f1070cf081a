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
//     exits and forgets the UID. A SyncPod that reports the pod finished
//     (SyncResult.Finished) goes on to SyncTerminatingPod as if it were
//     killed.
//   - Every change of a pod's state is published on the Board as a new
//     Lifecycle snapshot, which the rest of the node reads.
//   - A failed call is retried with the same work after a backoff (sooner if
//     a new update arrives); a running pod is re-synced every ResyncInterval.
//   - Shutdown stops the workers and never kills pods.
package podworkers

import (
	"context"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// SyncResult is what a successful SyncPod tells the worker.
type SyncResult struct {
	// Finished: the pod reached a terminal phase (all its containers
	// stopped and none will restart). The worker terminates it as if it
	// were killed, and never syncs it again.
	Finished bool
	// ResyncAfter, when positive, asks for the next sync within that delay
	// instead of the resync interval (the end of a crash back-off, say).
	ResyncAfter time.Duration
}

// Syncer does the work for one pod. It is implemented by the nodelet; the
// pod workers call it, never two calls for one pod at a time.
type Syncer interface {
	// SyncPod makes the pod run as its spec says. It is called again after
	// every update and every ResyncInterval (or the result's ResyncAfter)
	// while the pod runs. ctx is cancelled when the pod is killed
	// meanwhile. A result with Finished ends the pod's syncing.
	SyncPod(ctx context.Context, pod *corev1.Pod) (SyncResult, error)
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
	// Board receives the Lifecycle snapshots (a new one when nil; see
	// Workers.Lifecycle).
	Board *Board
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
}

// Workers dispatches pod updates to per-pod goroutines.
type Workers struct {
	cfg Config
	ctx context.Context
	// stop cancels every worker and every call in progress.
	stop context.CancelFunc
	wg   sync.WaitGroup

	board *Board

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
	if cfg.Board == nil {
		cfg.Board = NewBoard()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Workers{cfg: cfg, ctx: ctx, stop: cancel, board: cfg.Board,
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
			w.publish()
		}
		return
	}
	before := stateOf(w.workers[uid])
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
	if stateOf(wk) != before {
		w.publish()
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

// Lifecycle is the latest snapshot of every pod's state (the Board's).
func (w *Workers) Lifecycle() Lifecycle { return w.board.Lifecycle() }

// stateOf is what a worker publishes (the zero state for none).
func stateOf(wk *worker) PodState {
	if wk == nil {
		return PodState{}
	}
	return PodState{Worker: true, TerminationRequested: wk.killRequested,
		Terminated: wk.phase >= phaseTerminated, Removed: wk.removed}
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
