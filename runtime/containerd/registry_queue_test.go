package containerd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ctrdclient "github.com/containerd/containerd/v2/client"

	"github.com/nodelet/nodelet/test/testkit"
)

// countingPull is a pull that records how many run at once.
type countingPull struct {
	mu          sync.Mutex
	calls, now  int
	maxParallel int
	hold        time.Duration
}

func (c *countingPull) pull(ctx context.Context) (ctrdclient.Image, error) {
	c.mu.Lock()
	c.calls++
	c.now++
	c.maxParallel = max(c.maxParallel, c.now)
	c.mu.Unlock()
	defer func() { c.mu.Lock(); c.now--; c.mu.Unlock() }()
	select {
	case <-time.After(c.hold):
		return nil, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func TestPullQueueLimits(t *testing.T) {
	for _, tt := range []struct{ maxParallel, want int }{{0, 1}, {1, 1}, {3, 3}, {-1, 8}} {
		t.Run(fmt.Sprint(tt.maxParallel), func(t *testing.T) {
			q := newPullQueue(tt.maxParallel)
			cp := &countingPull{hold: 20 * time.Millisecond}
			var wg sync.WaitGroup
			for i := range 8 {
				wg.Go(func() {
					if _, _, err := q.do(context.Background(), fmt.Sprint(i), cp.pull); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			if cp.calls != 8 || cp.maxParallel != tt.want {
				t.Errorf("%d pulls, %d at most at once; want 8, %d", cp.calls, cp.maxParallel, tt.want)
			}
		})
	}
}

func TestPullQueueSharesPull(t *testing.T) {
	q := newPullQueue(0)
	release := make(chan struct{})
	var calls atomic.Int32
	want := errors.New("registry down")
	pull := func(ctx context.Context) (ctrdclient.Image, error) {
		calls.Add(1)
		<-release
		return nil, want
	}
	var wg sync.WaitGroup
	var joined sync.WaitGroup
	for range 4 {
		joined.Add(1)
		wg.Go(func() {
			joined.Done()
			if _, _, err := q.do(context.Background(), "img", pull); !errors.Is(err, want) {
				t.Errorf("shared pull: %v, want %v", err, want)
			}
		})
	}
	joined.Wait()
	testkit.Eventually(t, 5*time.Second, "4 callers waiting on the shared pull", func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.flights["img"] != nil && q.flights["img"].waiters == 4
	})
	close(release)
	wg.Wait()
	if calls.Load() != 1 {
		t.Errorf("%d pulls for 4 callers, want 1", calls.Load())
	}
	// Done pulls are forgotten: the next caller pulls again.
	if _, _, err := q.do(context.Background(), "img", pull); !errors.Is(err, want) || calls.Load() != 2 {
		t.Errorf("pull after the shared one: %v, %d calls", err, calls.Load())
	}
}

func TestPullQueueCancel(t *testing.T) {
	q := newPullQueue(0)
	started := make(chan struct{})
	pullCtx := make(chan context.Context, 1)
	blocking := func(ctx context.Context) (ctrdclient.Image, error) {
		pullCtx <- ctx
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	ctx1, cancel1 := context.WithCancel(context.Background())
	ctx2, cancel2 := context.WithCancel(context.Background())
	errs := make(chan error, 3)
	go func() { _, _, err := q.do(ctx1, "a", blocking); errs <- err }()
	<-started
	go func() { _, _, err := q.do(ctx2, "a", blocking); errs <- err }()
	testkit.Eventually(t, 5*time.Second, "2 callers waiting on the pull of a", func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.flights["a"].waiters == 2
	})

	// A caller queued behind the running pull gives up.
	ctx3, cancel3 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel3()
	if _, _, err := q.do(ctx3, "b", func(context.Context) (ctrdclient.Image, error) {
		t.Error("queued pull ran while the slot was taken")
		return nil, nil
	}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("queued caller: %v, want DeadlineExceeded", err)
	}

	// The first caller leaving does not stop the shared pull...
	cancel1()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Errorf("first caller: %v", err)
	}
	pctx := <-pullCtx
	select {
	case <-pctx.Done():
		t.Fatal("pull cancelled while a caller still waits")
	case <-time.After(20 * time.Millisecond):
	}
	// ...the last one does, and frees the slot.
	cancel2()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Errorf("second caller: %v", err)
	}
	<-pctx.Done()
	if _, _, err := q.do(context.Background(), "c", func(context.Context) (ctrdclient.Image, error) { return nil, nil }); err != nil {
		t.Errorf("pull after the cancelled one: %v", err)
	}
}
