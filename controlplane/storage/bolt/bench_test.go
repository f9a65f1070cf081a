package bolt

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodelet/nodelet/controlplane/storage"
)

// BenchmarkDurableCreates reports fsynced creates per second with 1, 8 and
// 64 concurrent writers. Run: make bench (or go test -bench DurableCreates).
func BenchmarkDurableCreates(b *testing.B) {
	value := make([]byte, 1024) // about the size of a small pod object
	for _, clients := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			s, err := Open(Config{Path: filepath.Join(b.TempDir(), "state.db")})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			total := 2000 * clients
			if total > 40000 {
				total = 40000
			}
			var next atomic.Int64
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				var wg sync.WaitGroup
				for c := 0; c < clients; c++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for {
							n := next.Add(1)
							if n > int64(total)*int64(i+1) {
								return
							}
							if _, err := s.Create(context.Background(), fmt.Sprintf("/pods/default/p%09d", n), value); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
			}
			elapsed := time.Since(start)
			b.ReportMetric(float64(total*b.N)/elapsed.Seconds(), "creates/s")
		})
	}
}

// BenchmarkWatchLatency reports the delay from the start of a write to its
// delivery to each of 100 and 1,000 watchers (p50 and p99), with writes
// paced at one every 2 ms.
func BenchmarkWatchLatency(b *testing.B) {
	const events = 300
	value := make([]byte, 1024)
	for _, watchers := range []int{100, 1000} {
		b.Run(fmt.Sprintf("watchers=%d", watchers), func(b *testing.B) {
			var all []time.Duration
			for i := 0; i < b.N; i++ {
				all = append(all, watchRound(b, watchers, events, value)...)
			}
			sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
			b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}

func watchRound(b *testing.B, watchers, events int, value []byte) []time.Duration {
	s, err := Open(Config{Path: filepath.Join(b.TempDir(), "state.db"), Hub: storage.HubOptions{MaxPending: 100000}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sent := make([]atomic.Int64, events+2) // start time by revision
	lat := make([][]time.Duration, watchers)
	var wg sync.WaitGroup
	for w := 0; w < watchers; w++ {
		wt, err := s.Watch(ctx, "/pods/", 0)
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for got := 0; got < events; got++ {
				ev, ok := <-wt.Events()
				if !ok {
					b.Errorf("watch ended: %v", wt.Err())
					return
				}
				lat[w] = append(lat[w], time.Duration(time.Now().UnixNano()-sent[ev.KV.ModRevision].Load()))
			}
		}()
	}
	for i := 1; i <= events; i++ {
		sent[i].Store(time.Now().UnixNano())
		if _, err := s.Create(ctx, fmt.Sprintf("/pods/default/p%06d", i), value); err != nil {
			b.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	wg.Wait()
	var out []time.Duration
	for _, l := range lat {
		out = append(out, l...)
	}
	return out
}
