package containerd

// The pull queue: upstream's serializeImagePulls and maxParallelImagePulls
// as a semaphore of pull slots, and one pull shared by the callers that ask
// for the same image with the same credentials while it runs.

import (
	"context"
	"sync"
	"time"

	ctrdclient "github.com/containerd/containerd/v2/client"
)

// pullFunc pulls an image. Its context ends when every caller waiting for
// the pull has gone.
type pullFunc func(ctx context.Context) (ctrdclient.Image, error)

// pullQueue runs pulls. Its methods are safe for concurrent use.
type pullQueue struct {
	slots chan struct{} // a token per running pull; nil: no limit

	mu      sync.Mutex
	flights map[string]*pullFlight
}

// pullFlight is one running pull and its outcome, set before done closes.
type pullFlight struct {
	done    chan struct{}
	cancel  context.CancelFunc
	waiters int // guarded by pullQueue.mu

	img  ctrdclient.Image
	took time.Duration // the pull itself, without the wait for a slot
	err  error
}

// newPullQueue allows maxParallel pulls at once: 0 or 1 is one at a time
// (upstream's default, serializeImagePulls), < 0 is no limit.
func newPullQueue(maxParallel int) *pullQueue {
	q := &pullQueue{flights: map[string]*pullFlight{}}
	switch {
	case maxParallel < 0:
	case maxParallel <= 1:
		q.slots = make(chan struct{}, 1)
	default:
		q.slots = make(chan struct{}, maxParallel)
	}
	return q
}

// do pulls with pull, or waits for the running pull of the same key. The
// pull waits for a slot first; it runs on a context of its own (with ctx's
// values) that is cancelled when every caller's context has ended. It
// returns the image and how long the pull itself took.
func (q *pullQueue) do(ctx context.Context, key string, pull pullFunc) (ctrdclient.Image, time.Duration, error) {
	q.mu.Lock()
	f, ok := q.flights[key]
	if !ok {
		fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		f = &pullFlight{done: make(chan struct{}), cancel: cancel}
		q.flights[key] = f
		go q.run(fctx, key, f, pull)
	}
	f.waiters++
	q.mu.Unlock()
	select {
	case <-f.done:
		return f.img, f.took, f.err
	case <-ctx.Done():
		q.leave(key, f)
		return nil, 0, ctx.Err()
	}
}

// leave drops a caller that stopped waiting; the last one cancels the pull.
func (q *pullQueue) leave(key string, f *pullFlight) {
	q.mu.Lock()
	defer q.mu.Unlock()
	f.waiters--
	if f.waiters == 0 {
		f.cancel()
		q.forget(key, f)
	}
}

// forget removes f from the running pulls (q.mu held).
func (q *pullQueue) forget(key string, f *pullFlight) {
	if q.flights[key] == f {
		delete(q.flights, key)
	}
}

func (q *pullQueue) run(ctx context.Context, key string, f *pullFlight, pull pullFunc) {
	defer func() {
		f.cancel()
		q.mu.Lock()
		q.forget(key, f)
		q.mu.Unlock()
		close(f.done)
	}()
	if q.slots != nil {
		select {
		case q.slots <- struct{}{}:
			defer func() { <-q.slots }()
		case <-ctx.Done():
			f.err = ctx.Err()
			return
		}
	}
	start := time.Now()
	f.img, f.err = pull(ctx)
	f.took = time.Since(start)
}
