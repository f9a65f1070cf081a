package keyqueue

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
)

type retryErr struct{ d time.Duration }

func (e retryErr) Error() string             { return "later" }
func (e retryErr) RetryAfter() time.Duration { return e.d }

func TestRunRetriesUntilSuccess(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, 10*time.Millisecond))
	var mu sync.Mutex
	calls := map[string]int{}
	done := make(chan struct{})
	reconcile := func(ctx context.Context, key string) error {
		mu.Lock()
		defer mu.Unlock()
		calls[key]++
		switch {
		case key == "flaky" && calls[key] < 3:
			return errors.New("boom")
		case key == "slow" && calls[key] < 2:
			return retryErr{5 * time.Millisecond}
		}
		if calls["flaky"] >= 3 && calls["slow"] >= 2 && calls["ok"] >= 1 {
			select {
			case <-done:
			default:
				close(done)
			}
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan struct{})
	go func() { Run(ctx, q, 2, reconcile, slog.New(slog.DiscardHandler)); close(finished) }()
	for _, k := range []string{"ok", "flaky", "slow"} {
		q.Add(k)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("keys not reconciled: %v", calls)
	}
	cancel()
	select {
	case <-finished:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	mu.Lock()
	defer mu.Unlock()
	if calls["ok"] != 1 || calls["flaky"] != 3 || calls["slow"] != 2 {
		t.Fatalf("calls %v", calls)
	}
	if q.NumRequeues("flaky") != 0 {
		t.Fatalf("a reconciled key must be forgotten by the rate limiter")
	}
}
