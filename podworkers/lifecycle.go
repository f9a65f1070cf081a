package podworkers

import (
	"sync/atomic"

	"k8s.io/apimachinery/pkg/types"
)

// PodState is where one pod is in its life, as the workers see it.
type PodState struct {
	// Worker: the pod has a worker (syncing, terminating or cleaning up).
	Worker bool
	// TerminationRequested: the pod is being or was killed (a Kill or
	// Remove, a deletionTimestamp, a terminal phase, a finished SyncPod).
	TerminationRequested bool
	// Terminated: SyncTerminatingPod returned nil; its containers are
	// stopped for good and will never be started again.
	Terminated bool
	// Removed: the pod is gone from the API (a Remove was seen).
	Removed bool
}

// Lifecycle is an immutable snapshot of every pod the workers know: the
// one view that status, admission, eviction, garbage collection and orphan
// cleanup read. A pod it does not hold is unknown: never seen, or cleaned
// up and removed.
type Lifecycle struct {
	pods map[types.UID]PodState
}

// State is the pod's state; the zero PodState for an unknown pod.
func (l Lifecycle) State(uid types.UID) PodState { return l.pods[uid] }

// Active reports whether the pod has a worker and is not being killed: it
// runs (or is about to) and counts against the node's resources.
func (l Lifecycle) Active(uid types.UID) bool {
	s := l.pods[uid]
	return s.Worker && !s.TerminationRequested
}

// Terminated reports whether the pod's containers are stopped for good.
func (l Lifecycle) Terminated(uid types.UID) bool { return l.pods[uid].Terminated }

// Known reports whether the pod has a worker, or had one and still has
// its API object (so it must never start again).
func (l Lifecycle) Known(uid types.UID) bool {
	_, ok := l.pods[uid]
	return ok
}

// ContentRemovable reports whether the pod's content (logs, directories,
// dead containers) may be removed: the workers are done with it and the
// API no longer has it, or the workers do not know it at all. A
// terminated pod still in the API keeps its content for kubectl logs.
func (l Lifecycle) ContentRemovable(uid types.UID) bool {
	s, ok := l.pods[uid]
	return !ok || (s.Worker && s.Removed && s.Terminated)
}

// Board holds the latest Lifecycle. The workers write it on every change
// of a pod's state (a few times in a pod's life); readers load it without
// a lock. It is made before the workers so that components built earlier
// (the status manager) can read it: calls go one way, workers → board ←
// readers.
type Board struct {
	v atomic.Pointer[Lifecycle]
}

// NewBoard returns a board holding an empty Lifecycle.
func NewBoard() *Board {
	b := &Board{}
	b.v.Store(&Lifecycle{})
	return b
}

// Lifecycle is the latest snapshot; it never changes once returned.
func (b *Board) Lifecycle() Lifecycle { return *b.v.Load() }

// publish stores a snapshot of the workers' state. Caller holds w.mu.
func (w *Workers) publish() {
	pods := make(map[types.UID]PodState, len(w.workers)+len(w.finished))
	for uid := range w.finished {
		pods[uid] = PodState{TerminationRequested: true, Terminated: true}
	}
	for uid, wk := range w.workers {
		pods[uid] = stateOf(wk)
	}
	w.board.v.Store(&Lifecycle{pods: pods})
}
