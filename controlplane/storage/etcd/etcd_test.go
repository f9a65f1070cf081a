package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodelet/nodelet/controlplane/storage"
	"github.com/nodelet/nodelet/controlplane/storage/etcd/etcdtest"
	"github.com/nodelet/nodelet/controlplane/storage/storagetest"
)

// TestContract runs the storage contract suite, unchanged, against a real
// etcd. Each store directory of the suite is a prefix of its own in one
// etcd, so reopening the directory finds the same data.
func TestContract(t *testing.T) {
	srv := etcdtest.Start(t)
	var mu sync.Mutex
	prefixes := map[string]string{}
	storagetest.Run(t, func(t *testing.T, dir string, opts storage.HubOptions) storage.Store {
		mu.Lock()
		p, ok := prefixes[dir]
		if !ok {
			p = fmt.Sprintf("/contract/%d", len(prefixes))
			prefixes[dir] = p
		}
		mu.Unlock()
		// No compactor: its writes would take revisions the suite counts.
		return open(t, srv, Config{Prefix: p, Hub: opts, CompactInterval: -1})
	})
}

func open(t *testing.T, srv *etcdtest.Server, cfg Config) *Store {
	t.Helper()
	cfg.Endpoints = []string{srv.Endpoint}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestTwoStores: two stores on one etcd (two control planes) see each
// other's writes, watches and revisions, and conflict with each other.
func TestTwoStores(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := context.Background()
	a := open(t, srv, Config{CompactInterval: -1})
	b := open(t, srv, Config{CompactInterval: -1})
	wb, err := b.Watch(ctx, "/pods/", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer wb.Stop()
	r1, err := a.Create(ctx, "/pods/ns/p", []byte("from a"))
	if err != nil {
		t.Fatal(err)
	}
	expect(t, wb, storage.Put, "/pods/ns/p", r1)
	kv, err := b.Get(ctx, "/pods/ns/p")
	if err != nil || string(kv.Value) != "from a" || kv.ModRevision != r1 {
		t.Fatalf("b reads %+v, %v", kv, err)
	}
	if b.Revision() < r1 {
		t.Fatalf("b's revision %d is behind a's write %d", b.Revision(), r1)
	}
	r2, err := b.Update(ctx, "/pods/ns/p", []byte("from b"), r1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Update(ctx, "/pods/ns/p", []byte("stale"), r1); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("a's stale update: %v, want ErrConflict", err)
	}
	if _, err := a.Create(ctx, "/pods/ns/p", nil); !errors.Is(err, storage.ErrExists) {
		t.Fatalf("a's create of b's key: %v, want ErrExists", err)
	}
	wa, err := a.Watch(ctx, "/pods/", r1)
	if err != nil {
		t.Fatal(err)
	}
	defer wa.Stop()
	expect(t, wa, storage.Put, "/pods/ns/p", r2)
	r3, _, err := a.Delete(ctx, "/pods/ns/p", r2)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, wb, storage.Put, "/pods/ns/p", r2)
	if ev := expect(t, wb, storage.Delete, "/pods/ns/p", r3); string(ev.PrevValue) != "from b" {
		t.Fatalf("delete event's previous value %q", ev.PrevValue)
	}
}

// TestPrefixIsolation: stores with different prefixes share nothing, even
// when one prefix is the start of the other.
func TestPrefixIsolation(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := context.Background()
	a := open(t, srv, Config{Prefix: "/registry", CompactInterval: -1})
	b := open(t, srv, Config{Prefix: "/registry-other/", CompactInterval: -1})
	w, err := a.Watch(ctx, "/", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := b.Create(ctx, "/pods/ns/p", []byte("b")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Get(ctx, "/pods/ns/p"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("a sees b's key: %v", err)
	}
	if res, err := a.List(ctx, "/", storage.ListOptions{}); err != nil || len(res.KVs) != 0 {
		t.Fatalf("a lists %d keys of b, err %v", len(res.KVs), err)
	}
	r, err := a.Create(ctx, "/pods/ns/p", []byte("a"))
	if err != nil {
		t.Fatalf("a's create of the same key: %v", err)
	}
	expect(t, w, storage.Put, "/pods/ns/p", r) // and not b's create before it
	resp, err := a.client.Get(ctx, "/registry/pods/ns/p")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "a" {
		t.Fatalf("a's key in etcd: %v %v", resp, err)
	}
}

// TestCompaction: the periodic compactor compacts etcd's history, a watch
// from before the store's history gets ErrCompacted, and a feed that finds
// its next revision compacted ends every watch with ErrCompacted and goes
// on from etcd's current revision.
func TestCompaction(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := context.Background()
	s := open(t, srv, Config{CompactInterval: 200 * time.Millisecond, Hub: storage.HubOptions{History: 5}})
	first, err := s.Create(ctx, "/c/0", []byte("v"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 20; i++ {
		if _, err := s.Create(ctx, fmt.Sprintf("/c/%d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	// Two rounds: the first learns a revision, the second compacts to it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := s.client.Get(ctx, "/registry/c/0", clientv3.WithRev(first))
		if isCompacted(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("revision %d not compacted: %v", first, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := s.Watch(ctx, "/c/", first); !errors.Is(err, storage.ErrCompacted) {
		t.Fatalf("watch from revision %d: %v, want ErrCompacted", first, err)
	}

	w, err := s.Watch(ctx, "/c/", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	// A feed resuming from a compacted revision (as after a disconnection
	// during which another control plane compacted).
	after, err := s.watchFrom(ctx, first)
	if !isCompacted(err) {
		t.Fatalf("watch from compacted revision %d: %v, want compacted", first, err)
	}
	now := s.restart(ctx, after)
	select {
	case _, ok := <-w.Events():
		if ok || !errors.Is(w.Err(), storage.ErrCompacted) {
			t.Fatalf("watch after the feed's compaction: open=%v err=%v, want ErrCompacted", ok, w.Err())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watch not ended by the feed's compaction")
	}
	w2, err := s.Watch(ctx, "/c/", now)
	if err != nil {
		t.Fatalf("watch from the new start %d: %v", now, err)
	}
	defer w2.Stop()
	r, err := s.Create(ctx, "/c/new", nil)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, w2, storage.Put, "/c/new", r)
}

// TestCompactorTakesTurns: of two control planes ticking together, one
// compacts per round; the other learns the round and skips it.
func TestCompactorTakesTurns(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := context.Background()
	s := open(t, srv, Config{CompactInterval: -1})
	var compacted []string
	mk := func(name string) *compactor {
		return &compactor{kv: s.client, compact: func(_ context.Context, rev int64) error {
			compacted = append(compacted, fmt.Sprintf("%s@%d", name, rev))
			return nil
		}}
	}
	a, b := mk("a"), mk("b")
	for round := 0; round < 3; round++ {
		for _, c := range []*compactor{a, b} {
			if _, err := c.tick(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	// a ticks first each round, so a wins every round: round 1 only
	// learns a revision, rounds 2 and 3 compact to the revision of the
	// round before. b loses each compare-and-swap and never compacts.
	if len(compacted) != 2 || compacted[0][0] != 'a' || compacted[1][0] != 'a' || compacted[0] == compacted[1] {
		t.Fatalf("compactions %v: want two by a, at different revisions", compacted)
	}
}

// TestCheck: healthy while etcd answers; not once etcd is gone or the store
// closed.
func TestCheck(t *testing.T) {
	srv := etcdtest.Start(t)
	s := open(t, srv, Config{CompactInterval: -1})
	ctx := context.Background()
	if err := storage.CheckHealth(ctx, s); err != nil {
		t.Fatalf("healthy store: %v", err)
	}
	srv.Stop()
	tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := s.Check(tctx); err == nil {
		t.Fatal("etcd stopped, check passed")
	}
	s.Close()
	if err := s.Check(ctx); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("closed store: %v", err)
	}
}

func expect(t *testing.T, w storage.Watcher, typ storage.EventType, key string, rev int64) storage.Event {
	t.Helper()
	select {
	case ev, ok := <-w.Events():
		if !ok {
			t.Fatalf("watch closed: %v", w.Err())
		}
		if ev.Type != typ || ev.KV.Key != key || ev.KV.ModRevision != rev {
			t.Fatalf("event %v %s@%d, want %v %s@%d", ev.Type, ev.KV.Key, ev.KV.ModRevision, typ, key, rev)
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatalf("no event for %s@%d", key, rev)
	}
	return storage.Event{}
}

// TestListAtRevision: the later pages of a list are read at the first
// page's revision, whatever was written since; a compacted revision gives
// ErrCompacted.
func TestListAtRevision(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := context.Background()
	s := open(t, srv, Config{CompactInterval: -1})
	for i := 0; i < 4; i++ {
		if _, err := s.Create(ctx, fmt.Sprintf("/l/%d", i), []byte("old")); err != nil {
			t.Fatal(err)
		}
	}
	first, err := s.List(ctx, "/l/", storage.ListOptions{Limit: 2})
	if err != nil || len(first.KVs) != 2 || !first.More {
		t.Fatalf("first page: %+v %v", first, err)
	}
	if _, err := s.Update(ctx, "/l/3", []byte("new"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "/l/4", nil); err != nil {
		t.Fatal(err)
	}
	next := storage.ListOptions{StartKey: first.KVs[1].Key + "\x00", Revision: first.Revision}
	rest, err := s.List(ctx, "/l/", next)
	if err != nil || rest.Revision != first.Revision || rest.More || len(rest.KVs) != 2 || string(rest.KVs[1].Value) != "old" {
		t.Fatalf("second page at revision %d: %+v %v; want /l/2 and /l/3 as they were", first.Revision, rest, err)
	}
	if _, err := s.client.Compact(ctx, s.Revision()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.List(ctx, "/l/", next); !errors.Is(err, storage.ErrCompacted) {
		t.Fatalf("page at a compacted revision: %v, want ErrCompacted", err)
	}
}

// TestTLS: --etcd-cafile, --etcd-certfile and --etcd-keyfile reach an etcd
// that serves https and requires client certificates; without the client
// certificate the store cannot start.
func TestTLS(t *testing.T) {
	srv := etcdtest.StartTLS(t)
	s := open(t, srv, Config{CAFile: srv.CAFile, CertFile: srv.CertFile, KeyFile: srv.KeyFile, CompactInterval: -1})
	ctx := context.Background()
	rev, err := s.Create(ctx, "/tls/k", []byte("v"))
	if err != nil {
		t.Fatal(err)
	}
	if kv, err := s.Get(ctx, "/tls/k"); err != nil || kv.ModRevision != rev {
		t.Fatalf("get over TLS: %+v %v", kv, err)
	}
	if s2, err := New(Config{Endpoints: []string{srv.Endpoint}, CAFile: srv.CAFile, DialTimeout: 2 * time.Second}); err == nil {
		s2.Close()
		t.Fatal("a store without a client certificate started")
	}
}
