// Package keyqueue runs the worker loop every controller shares: take a
// key from a rate-limited workqueue, reconcile it, forget it on success,
// requeue it on failure.
package keyqueue

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/workqueue"
)

// Retrier is implemented by errors that say when to try again: the key is
// requeued after RetryAfter (or with the rate limit when it is zero) and
// the error is logged only at debug level, since it is expected (e.g. a
// namespace whose content is still going away).
type Retrier interface {
	error
	RetryAfter() time.Duration
}

// Run runs workers goroutines of Work until ctx ends, then shuts q down
// and waits for them.
func Run[K comparable](ctx context.Context, q workqueue.TypedRateLimitingInterface[K], workers int, reconcile func(context.Context, K) error, log *slog.Logger) {
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			Work(ctx, q, reconcile, log)
		}()
	}
	<-ctx.Done()
	q.ShutDown()
	wg.Wait()
}

// Work processes keys from q until q shuts down. A failed key is requeued
// with q's rate limit (or after a Retrier's delay); conflicts, a normal
// result of a stale cache, are logged at debug level.
func Work[K comparable](ctx context.Context, q workqueue.TypedRateLimitingInterface[K], reconcile func(context.Context, K) error, log *slog.Logger) {
	for {
		key, quit := q.Get()
		if quit {
			return
		}
		handle(ctx, q, key, reconcile(ctx, key), log)
		q.Done(key)
	}
}

func handle[K comparable](ctx context.Context, q workqueue.TypedRateLimitingInterface[K], key K, err error, log *slog.Logger) {
	var retry Retrier
	switch {
	case err == nil:
		q.Forget(key)
	case ctx.Err() != nil:
		// Shutting down: the key is reconciled again after a restart.
	case errors.As(err, &retry):
		log.Debug("not done yet", "key", key, "err", err)
		if d := retry.RetryAfter(); d > 0 {
			q.AddAfter(key, d)
		} else {
			q.AddRateLimited(key)
		}
	default:
		level := slog.LevelWarn
		if apierrors.IsConflict(err) {
			level = slog.LevelDebug
		}
		log.Log(ctx, level, "sync failed; requeued", "key", key, "err", err)
		q.AddRateLimited(key)
	}
}
