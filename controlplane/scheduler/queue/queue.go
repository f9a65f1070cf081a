// Package queue is the scheduler's queue of pods waiting for a node, with
// upstream's three parts: an active heap (higher priority first, then
// older), a backoff heap (pods that failed recently wait 1s doubling up to
// 10s), and an unschedulable set (pods no node fits wait there until
// something changes in the cluster, or at most a minute).
package queue

import (
	"context"
	"sync"
	"time"

	"github.com/nodelet/nodelet/controlplane/scheduler/framework"
)

type location int

const (
	nowhere location = iota
	inActive
	inBackoff
	inUnschedulable
)

// QueuedPod is a pod in the queue with its scheduling history.
type QueuedPod struct {
	Info *framework.PodInfo
	// Attempts counts scheduling attempts so far (set by Pop).
	Attempts int
	// Cycle is the scheduling cycle of the last Pop.
	Cycle int64

	seq          uint64
	priority     int32
	where        location
	index        int
	backoffUntil time.Time
	parkedAt     time.Time
}

// Options tunes the queue; zero values mean upstream's defaults.
type Options struct {
	InitialBackoff time.Duration // 1s
	MaxBackoff     time.Duration // 10s
	// MaxUnschedulable is how long a pod stays unschedulable without any
	// cluster change before it is retried anyway (60s).
	MaxUnschedulable time.Duration
	Now              func() time.Time
}

// Queue is safe for concurrent use.
type Queue struct {
	opts Options
	mu   sync.Mutex
	cond *sync.Cond

	active        *podHeap
	backoff       *podHeap
	unschedulable map[string]*QueuedPod
	pods          map[string]*QueuedPod // every queued pod, by key
	// inFlight holds pods popped and not yet done; a non-nil value is a
	// newer version seen while the pod was being scheduled.
	inFlight map[string]*framework.PodInfo
	deleted  map[string]bool // in-flight pods deleted meanwhile

	seq              uint64
	schedulingCycle  int64
	moveRequestCycle int64
	closed           bool
}

// New returns an empty queue.
func New(opts Options) *Queue {
	if opts.InitialBackoff <= 0 {
		opts.InitialBackoff = time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 10 * time.Second
	}
	if opts.MaxUnschedulable <= 0 {
		opts.MaxUnschedulable = 60 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	q := &Queue{
		opts:          opts,
		active:        &podHeap{less: activeLess},
		backoff:       &podHeap{less: func(a, b *QueuedPod) bool { return a.backoffUntil.Before(b.backoffUntil) }},
		unschedulable: map[string]*QueuedPod{},
		pods:          map[string]*QueuedPod{},
		inFlight:      map[string]*framework.PodInfo{},
		deleted:       map[string]bool{},
	}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// activeLess orders by priority (higher first), then creation time, then
// arrival order.
func activeLess(a, b *QueuedPod) bool {
	if a.priority != b.priority {
		return a.priority > b.priority
	}
	ta, tb := a.Info.Pod.CreationTimestamp.Time, b.Info.Pod.CreationTimestamp.Time
	if !ta.Equal(tb) {
		return ta.Before(tb)
	}
	return a.seq < b.seq
}

func priorityOf(pi *framework.PodInfo) int32 {
	if p := pi.Pod.Spec.Priority; p != nil {
		return *p
	}
	return 0
}

// Add queues a new pending pod (or updates it if already known).
func (q *Queue) Add(pi *framework.PodInfo) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.updateLocked(pi)
}

// Update replaces the queued version of a pod. An unschedulable pod is
// moved on (its spec may now fit), a pod being scheduled keeps the newer
// version for a retry, an unknown pod is added.
func (q *Queue) Update(pi *framework.PodInfo) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.updateLocked(pi)
}

func (q *Queue) updateLocked(pi *framework.PodInfo) {
	if _, ok := q.inFlight[pi.Key]; ok {
		q.inFlight[pi.Key] = pi
		delete(q.deleted, pi.Key) // deleted and created again
		return
	}
	qp, ok := q.pods[pi.Key]
	if !ok {
		q.seq++
		qp = &QueuedPod{Info: pi, seq: q.seq, priority: priorityOf(pi)}
		q.pods[pi.Key] = qp
		q.pushActive(qp)
		return
	}
	qp.Info, qp.priority = pi, priorityOf(pi)
	switch qp.where {
	case inActive:
		q.active.fix(qp)
	case inUnschedulable:
		delete(q.unschedulable, pi.Key)
		q.moveOn(qp, q.opts.Now())
	}
}

func (q *Queue) pushActive(qp *QueuedPod) {
	qp.where = inActive
	q.active.push(qp)
	q.cond.Signal()
}

// moveOn sends a pod leaving the unschedulable set to the backoff heap if
// its backoff has not expired, else to the active heap.
func (q *Queue) moveOn(qp *QueuedPod, now time.Time) {
	if now.Before(qp.backoffUntil) {
		qp.where = inBackoff
		q.backoff.push(qp)
		return
	}
	q.pushActive(qp)
}

// Delete drops a pod from the queue (deleted, or bound by someone else).
func (q *Queue) Delete(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.inFlight[key]; ok {
		q.deleted[key] = true
	}
	qp, ok := q.pods[key]
	if !ok {
		return
	}
	delete(q.pods, key)
	switch qp.where {
	case inActive:
		q.active.remove(qp)
	case inBackoff:
		q.backoff.remove(qp)
	case inUnschedulable:
		delete(q.unschedulable, key)
	}
	qp.where = nowhere
}

// Pop blocks until a pod is active and returns it, or returns false once
// the queue is closed. The pod is in flight until Done or Requeue.
func (q *Queue) Pop() (*QueuedPod, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.active.Len() == 0 && !q.closed {
		q.cond.Wait()
	}
	if q.closed {
		return nil, false
	}
	qp := q.active.pop()
	qp.where = nowhere
	delete(q.pods, qp.Info.Key)
	q.schedulingCycle++
	qp.Cycle = q.schedulingCycle
	qp.Attempts++
	q.inFlight[qp.Info.Key] = nil
	return qp, true
}

// Done ends the flight of a pod that was scheduled (assumed). A pod of
// the same name created anew meanwhile is queued.
func (q *Queue) Done(qp *QueuedPod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	key := qp.Info.Key
	newer := q.inFlight[key]
	delete(q.inFlight, key)
	delete(q.deleted, key)
	if newer != nil && newer.Pod.UID != qp.Info.Pod.UID {
		q.updateLocked(newer)
	}
}

// Requeue returns a pod that failed. Unschedulable pods (no node fits)
// park in the unschedulable set, unless the cluster changed while they were
// being scheduled; other failures (errors, failed binds) back off. A pod
// deleted while in flight is dropped; one updated meanwhile is requeued in
// its newer version.
func (q *Queue) Requeue(qp *QueuedPod, unschedulable bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	key := qp.Info.Key
	newer, wasInFlight := q.inFlight[key]
	delete(q.inFlight, key)
	if q.deleted[key] {
		delete(q.deleted, key)
		return
	}
	if _, ok := q.pods[key]; ok {
		return // re-added meanwhile
	}
	if newer != nil && wasInFlight {
		qp.Info, qp.priority = newer, priorityOf(newer)
	}
	now := q.opts.Now()
	qp.backoffUntil = now.Add(q.backoffFor(qp.Attempts))
	q.pods[key] = qp
	if unschedulable && q.moveRequestCycle < qp.Cycle && newer == nil {
		qp.where, qp.parkedAt = inUnschedulable, now
		q.unschedulable[key] = qp
		return
	}
	qp.where = inBackoff
	q.backoff.push(qp)
}

func (q *Queue) backoffFor(attempts int) time.Duration {
	d := q.opts.InitialBackoff
	for i := 1; i < attempts && d < q.opts.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, q.opts.MaxBackoff)
}

// MoveAllToActiveOrBackoff retries every unschedulable pod: something in
// the cluster changed (a node was added or updated, a pod deleted).
func (q *Queue) MoveAllToActiveOrBackoff() {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.opts.Now()
	for key, qp := range q.unschedulable {
		delete(q.unschedulable, key)
		q.moveOn(qp, now)
	}
	q.moveRequestCycle = q.schedulingCycle
}

// FlushBackoff moves pods whose backoff expired to the active heap.
func (q *Queue) FlushBackoff() {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.opts.Now()
	for p := q.backoff.peek(); p != nil && !now.Before(p.backoffUntil); p = q.backoff.peek() {
		q.backoff.pop()
		q.pushActive(p)
	}
}

// FlushUnschedulable retries pods parked longer than MaxUnschedulable.
func (q *Queue) FlushUnschedulable() {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.opts.Now()
	for key, qp := range q.unschedulable {
		if now.Sub(qp.parkedAt) >= q.opts.MaxUnschedulable {
			delete(q.unschedulable, key)
			q.moveOn(qp, now)
		}
	}
}

// Run flushes the backoff heap every 100ms and the unschedulable set every
// 30s (upstream's interval), then closes the queue when ctx ends.
func (q *Queue) Run(ctx context.Context) {
	backoff := time.NewTicker(100 * time.Millisecond)
	defer backoff.Stop()
	unsched := time.NewTicker(30 * time.Second)
	defer unsched.Stop()
	for {
		select {
		case <-ctx.Done():
			q.Close()
			return
		case <-backoff.C:
			q.FlushBackoff()
		case <-unsched.C:
			q.FlushUnschedulable()
		}
	}
}

// Close wakes Pop callers; Pop returns false from then on.
func (q *Queue) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.cond.Broadcast()
}

// Lens returns the sizes of the active, backoff and unschedulable parts.
func (q *Queue) Lens() (active, backoff, unschedulable int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.active.Len(), q.backoff.Len(), len(q.unschedulable)
}
