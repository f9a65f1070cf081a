package leader

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodelet/nodelet/controlplane/controlplanetest"
	"github.com/nodelet/nodelet/test/testkit"
)

// TestOneLeaderAtATime runs two candidates against a real API server: only
// one leads at any moment, and the other takes over when the first stops.
func TestOneLeaderAtATime(t *testing.T) {
	srv := controlplanetest.Start(t, controlplanetest.Options{})
	cs := srv.Clientset(t)
	var leading, maxLeading atomic.Int32
	var mu sync.Mutex
	var leaders []string
	candidate := func(ctx context.Context, id string) error {
		return Run(ctx, Config{Client: cs, Namespace: "kube-system", Name: "test-lease", Identity: id,
			LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 200 * time.Millisecond},
			func(ctx context.Context) error {
				n := leading.Add(1)
				if n > maxLeading.Load() {
					maxLeading.Store(n)
				}
				mu.Lock()
				leaders = append(leaders, id)
				mu.Unlock()
				<-ctx.Done()
				leading.Add(-1)
				return nil
			})
	}
	ctxA, stopA := context.WithCancel(context.Background())
	ctxB, stopB := context.WithCancel(context.Background())
	defer stopB()
	doneA := make(chan error, 1)
	go func() { doneA <- candidate(ctxA, "a") }()
	testkit.Eventually(t, 30*time.Second, "a leading", func() bool { return leading.Load() == 1 })
	go candidate(ctxB, "b")
	time.Sleep(1 * time.Second) // b campaigns while a leads
	if got := leading.Load(); got != 1 {
		t.Fatalf("%d leaders while a holds the lease", got)
	}
	stopA()
	if err := <-doneA; err != nil {
		t.Fatalf("a: %v", err)
	}
	testkit.Eventually(t, 30*time.Second, "b leading after a", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(leaders) == 2 && leaders[1] == "b"
	})
	if maxLeading.Load() != 1 {
		t.Fatalf("saw %d leaders at once", maxLeading.Load())
	}
}
