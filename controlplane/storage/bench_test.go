package storage_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodelet/nodelet/controlplane/storage"
	"github.com/nodelet/nodelet/controlplane/storage/bolt"
	"github.com/nodelet/nodelet/controlplane/storage/etcd"
	"github.com/nodelet/nodelet/controlplane/storage/etcd/etcdtest"
)

// BenchmarkCreates compares the backends with one harness: durable creates
// per second of 1 KiB values from 1, 8 and 64 concurrent writers, into
// bbolt (group commit, one fsync per batch) and into a one-member etcd on
// loopback (raft, WAL fsync per batch), each in a fresh store. Run:
//
//	go test -run '^$' -bench Creates -benchtime 1x ./controlplane/storage/
func BenchmarkCreates(b *testing.B) {
	parent := b
	var srv *etcdtest.Server
	var stores atomic.Int64
	backends := []struct {
		name string
		open func(b *testing.B) storage.Store
	}{
		{"bolt", func(b *testing.B) storage.Store {
			s, err := bolt.Open(bolt.Config{Path: filepath.Join(b.TempDir(), "state.db")})
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
		{"etcd", func(b *testing.B) storage.Store {
			if srv == nil {
				srv = etcdtest.Start(parent) // one etcd for every etcd run
			}
			s, err := etcd.New(etcd.Config{Endpoints: []string{srv.Endpoint},
				Prefix: fmt.Sprintf("/bench/%d", stores.Add(1)), CompactInterval: -1})
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
	}
	for _, be := range backends {
		for _, clients := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("backend=%s/clients=%d", be.name, clients), func(b *testing.B) {
				s := be.open(b)
				defer s.Close()
				createRounds(b, s, clients)
			})
		}
	}
}

// createRounds runs b.N rounds of min(2000*clients, 40000) creates shared
// by clients goroutines and reports creates per second.
func createRounds(b *testing.B, s storage.Store, clients int) {
	value := make([]byte, 1024) // about the size of a small pod object
	total := min(2000*clients, 40000)
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
	b.ReportMetric(float64(total*b.N)/time.Since(start).Seconds(), "creates/s")
}
