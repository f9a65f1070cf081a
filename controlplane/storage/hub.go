package storage

import (
	"context"
	"strings"
	"sync"
)

// Hub fans committed events out to watchers from memory and keeps a bounded
// history so a watcher can resume from a recent revision. Store
// implementations own one Hub and call Publish after each commit.
//
// Publish never blocks on a watcher: each watcher has its own queue drained
// by its own goroutine, and a watcher whose queue grows past maxPending is
// cut off with ErrTooSlow (the etcd "victim" idea, simplified: the client
// re-watches from its last revision and is served from history).
type Hub struct {
	mu         sync.Mutex
	ring       []Event // circular buffer of the newest events
	start      int     // index of the oldest event in ring
	count      int
	compacted  int64 // revisions <= compacted are no longer in history
	bytes      int64 // what the events in ring hold (eventBytes)
	maxBytes   int64
	current    int64
	watchers   map[*hubWatcher]struct{}
	maxPending int
	closed     bool
}

// HubOptions sizes a Hub. Zero values take defaults.
type HubOptions struct {
	// History is the number of events kept for resuming watches (default 10000).
	History int
	// HistoryBytes bounds what those events may hold (keys, values and
	// previous values; default 64 MiB): rewriting large objects must not
	// pin gigabytes. The oldest events go first; the newest always stays.
	HistoryBytes int64
	// MaxPending is how many undelivered events a watcher may hold before
	// it is cut off (default 10000).
	MaxPending int
}

// NewHub returns a hub whose history starts empty at revision current:
// watches from any earlier revision get ErrCompacted.
func NewHub(current int64, opts HubOptions) *Hub {
	if opts.History <= 0 {
		opts.History = 10000
	}
	if opts.MaxPending <= 0 {
		opts.MaxPending = 10000
	}
	if opts.HistoryBytes <= 0 {
		opts.HistoryBytes = DefaultHistoryBytes
	}
	return &Hub{
		maxBytes:   opts.HistoryBytes,
		ring:       make([]Event, opts.History),
		compacted:  current,
		current:    current,
		watchers:   make(map[*hubWatcher]struct{}),
		maxPending: opts.MaxPending,
	}
}

// Publish records committed events (in revision order) and hands them to
// every matching watcher. It must be called by one writer at a time, in
// commit order.
func (h *Hub) Publish(events []Event) {
	if len(events) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ev := range events {
		h.appendHistory(ev)
	}
	h.current = events[len(events)-1].KV.ModRevision
	for w := range h.watchers {
		w.enqueue(events, h.maxPending)
	}
}

// DefaultHistoryBytes is HubOptions.HistoryBytes's default.
const DefaultHistoryBytes = 64 << 20

// eventBytes is what an event in history holds.
func eventBytes(ev Event) int64 {
	return int64(len(ev.KV.Key) + len(ev.KV.Value) + len(ev.PrevValue))
}

func (h *Hub) appendHistory(ev Event) {
	n := len(h.ring)
	if h.count == n {
		h.dropOldest()
	}
	h.ring[(h.start+h.count)%n] = ev
	h.count++
	h.bytes += eventBytes(ev)
	for h.bytes > h.maxBytes && h.count > 1 {
		h.dropOldest()
	}
}

// dropOldest compacts the oldest event out of history.
func (h *Hub) dropOldest() {
	old := h.ring[h.start]
	h.compacted = old.KV.ModRevision
	h.bytes -= eventBytes(old)
	h.ring[h.start] = Event{}
	h.start = (h.start + 1) % len(h.ring)
	h.count--
}

// CompactedRevision is the newest revision that is no longer in history.
func (h *Hub) CompactedRevision() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.compacted
}

// Watch registers a watcher for keys under prefix with revisions greater
// than fromRevision (0: from the current revision). Registration and the
// replay from history happen under the publish lock, so nothing is missed
// or delivered twice. fromRevision may be ahead of what the hub has
// published (a store whose hub is fed asynchronously, as etcd's is, knows
// revisions before their events arrive): events up to it are skipped.
func (h *Hub) Watch(ctx context.Context, prefix string, fromRevision int64) (Watcher, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	if fromRevision == 0 {
		fromRevision = h.current
	}
	if fromRevision < h.compacted {
		return nil, ErrCompacted
	}
	w := &hubWatcher{
		hub:    h,
		prefix: prefix,
		after:  fromRevision,
		signal: make(chan struct{}, 1),
		out:    make(chan Event, 64),
		done:   make(chan struct{}),
	}
	n := len(h.ring)
	for i := 0; i < h.count; i++ {
		ev := h.ring[(h.start+i)%n]
		if ev.KV.ModRevision > fromRevision && strings.HasPrefix(ev.KV.Key, prefix) {
			w.queue = append(w.queue, ev)
		}
	}
	if len(w.queue) > 0 {
		w.signal <- struct{}{}
	}
	h.watchers[w] = struct{}{}
	go w.run(ctx)
	return w, nil
}

// Reset ends every watch with err and empties the history, which starts
// again at revision current: for a store whose feed of events broke with a
// gap (etcd compacted past it), so that no watcher misses events silently.
func (h *Hub) Reset(current int64, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.watchers {
		w.fail(err)
		delete(h.watchers, w)
	}
	for h.count > 0 {
		h.dropOldest()
	}
	h.compacted, h.current = current, current
}

// Close ends every watch with ErrClosed.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for w := range h.watchers {
		w.fail(ErrClosed)
		delete(h.watchers, w)
	}
}

func (h *Hub) remove(w *hubWatcher) {
	h.mu.Lock()
	delete(h.watchers, w)
	h.mu.Unlock()
}

type hubWatcher struct {
	hub    *Hub
	prefix string
	after  int64 // the revision the watch started after

	mu     sync.Mutex
	queue  []Event
	err    error
	failed bool

	signal   chan struct{}
	out      chan Event
	done     chan struct{}
	stopOnce sync.Once
}

// enqueue is called with the hub lock held; it never blocks.
func (w *hubWatcher) enqueue(events []Event, maxPending int) {
	w.mu.Lock()
	if w.failed {
		w.mu.Unlock()
		return
	}
	added := false
	for _, ev := range events {
		if ev.KV.ModRevision > w.after && strings.HasPrefix(ev.KV.Key, w.prefix) {
			w.queue = append(w.queue, ev)
			added = true
		}
	}
	overflow := len(w.queue) > maxPending
	if overflow {
		w.failed = true
		w.err = ErrTooSlow
		w.queue = nil
	}
	w.mu.Unlock()
	if added || overflow {
		select {
		case w.signal <- struct{}{}:
		default:
		}
	}
}

func (w *hubWatcher) fail(err error) {
	w.mu.Lock()
	if !w.failed {
		w.failed = true
		w.err = err
		w.queue = nil
	}
	w.mu.Unlock()
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

// run moves queued events to the out channel until the watch ends.
func (w *hubWatcher) run(ctx context.Context) {
	defer close(w.out)
	defer w.hub.remove(w)
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.done:
			return
		case <-w.signal:
		}
		w.mu.Lock()
		batch, failed := w.queue, w.failed
		w.queue = nil
		w.mu.Unlock()
		if failed {
			return
		}
		for _, ev := range batch {
			select {
			case w.out <- ev:
			case <-ctx.Done():
				return
			case <-w.done:
				return
			}
		}
	}
}

func (w *hubWatcher) Events() <-chan Event { return w.out }

func (w *hubWatcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *hubWatcher) Stop() {
	w.stopOnce.Do(func() { close(w.done) })
}
