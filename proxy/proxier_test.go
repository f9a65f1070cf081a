package proxy

import (
	"context"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/nodelet/nodelet/test/testkit"
)

type fakeApplier struct {
	mu    sync.Mutex
	times []time.Time
}

func (f *fakeApplier) Apply(Plan, netip.Addr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.times = append(f.times, time.Now())
	return nil
}

func (f *fakeApplier) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.times)
}

// TestSyncLoopCoalesces: a sync at once, then a burst of changes within
// MinSyncPeriod makes one more sync, not one per change, and syncs are
// never closer than MinSyncPeriod.
func TestSyncLoopCoalesces(t *testing.T) {
	f := &fakeApplier{}
	s := &syncer{exec: f, cfg: Config{MinSyncPeriod: 200 * time.Millisecond, ResyncPeriod: time.Hour,
		Log: discardLog()}, last: [3]int{-1, -1, -1}}
	kick := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		s.loop(ctx, kick, func() ([]*corev1.Service, []*discoveryv1.EndpointSlice, Options) { return nil, nil, Options{} })
		close(done)
	}()
	testkit.Eventually(t, 5*time.Second, "the first sync", func() bool { return f.count() == 1 })
	for range 50 { // a burst, as 50 EndpointSlice events
		select {
		case kick <- struct{}{}:
		default:
		}
		time.Sleep(2 * time.Millisecond)
	}
	testkit.Eventually(t, 5*time.Second, "one more sync", func() bool { return f.count() >= 2 })
	time.Sleep(500 * time.Millisecond)
	cancel()
	<-done
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.times) > 3 {
		t.Fatalf("%d syncs for one burst, want at most 3 (start, then coalesced)", len(f.times))
	}
	for i := 1; i < len(f.times); i++ {
		if d := f.times[i].Sub(f.times[i-1]); d < 190*time.Millisecond {
			t.Fatalf("syncs %v apart, want >= MinSyncPeriod", d)
		}
	}
}

// TestSyncLoopResyncs: without any change the rules are re-applied every
// ResyncPeriod.
func TestSyncLoopResyncs(t *testing.T) {
	f := &fakeApplier{}
	s := &syncer{exec: f, cfg: Config{MinSyncPeriod: time.Millisecond, ResyncPeriod: 50 * time.Millisecond, Log: discardLog()}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.loop(ctx, make(chan struct{}), func() ([]*corev1.Service, []*discoveryv1.EndpointSlice, Options) { return nil, nil, Options{} })
	testkit.Eventually(t, 5*time.Second, "three syncs", func() bool { return f.count() >= 3 })
}

func discardLog() *slog.Logger { return slog.New(slog.DiscardHandler) }
