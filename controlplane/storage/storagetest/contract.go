// Package storagetest is the contract suite every storage.Store
// implementation must pass. Backends call Run from their own tests.
package storagetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nodelet/nodelet/controlplane/storage"
)

// Opener opens a store whose data lives in dir (reopening the same dir must
// find the same data) and whose watch history holds history events.
type Opener func(t *testing.T, dir string, opts storage.HubOptions) storage.Store

// Run runs the whole contract suite.
func Run(t *testing.T, open Opener) {
	tests := map[string]func(*testing.T, Opener){
		"CRUD":                  testCRUD,
		"Conflicts":             testConflicts,
		"ListPrefixAndPages":    testList,
		"ConcurrentCreates":     testConcurrentCreates,
		"ConcurrentCAS":         testConcurrentCAS,
		"WatchFromRevision":     testWatchFromRevision,
		"WatchCompacted":        testWatchCompacted,
		"SlowWatcherCutOff":     testSlowWatcher,
		"ReopenKeepsEverything": testReopen,
	}
	for name, fn := range tests {
		t.Run(name, func(t *testing.T) { fn(t, open) })
	}
}

func openTemp(t *testing.T, open Opener, opts storage.HubOptions) storage.Store {
	t.Helper()
	s := open(t, t.TempDir(), opts)
	t.Cleanup(func() { s.Close() })
	return s
}

func testCRUD(t *testing.T, open Opener) {
	ctx := context.Background()
	s := openTemp(t, open, storage.HubOptions{})
	r1, err := s.Create(ctx, "/a/1", []byte("one"))
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if _, err := s.Create(ctx, "/a/1", []byte("again")); !errors.Is(err, storage.ErrExists) {
		t.Fatalf("second create: got %v, want ErrExists", err)
	}
	kv, err := s.Get(ctx, "/a/1")
	if err != nil || string(kv.Value) != "one" || kv.ModRevision != r1 || kv.CreateRevision != r1 {
		t.Fatalf("get: %+v %v (create rev %d)", kv, err, r1)
	}
	r2, err := s.Update(ctx, "/a/1", []byte("two"), r1)
	if err != nil || r2 <= r1 {
		t.Fatalf("update: rev %d err %v, want > %d", r2, err, r1)
	}
	kv, _ = s.Get(ctx, "/a/1")
	if kv.CreateRevision != r1 || kv.ModRevision != r2 || string(kv.Value) != "two" {
		t.Fatalf("after update: %+v", kv)
	}
	if s.Revision() != r2 {
		t.Fatalf("Revision() = %d, want %d", s.Revision(), r2)
	}
	r3, prev, err := s.Delete(ctx, "/a/1", 0)
	if err != nil || r3 <= r2 || string(prev.Value) != "two" {
		t.Fatalf("delete: rev %d prev %+v err %v", r3, prev, err)
	}
	if _, err := s.Get(ctx, "/a/1"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("get after delete: %v, want ErrNotFound", err)
	}
	if _, err := s.Update(ctx, "/a/1", []byte("x"), 0); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("update missing: %v, want ErrNotFound", err)
	}
	if _, _, err := s.Delete(ctx, "/a/1", 0); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("delete missing: %v, want ErrNotFound", err)
	}
}

func testConflicts(t *testing.T, open Opener) {
	ctx := context.Background()
	s := openTemp(t, open, storage.HubOptions{})
	r1, _ := s.Create(ctx, "/k", []byte("v1"))
	if _, err := s.Update(ctx, "/k", []byte("v2"), r1); err != nil {
		t.Fatalf("update: %v", err)
	}
	if _, err := s.Update(ctx, "/k", []byte("stale"), r1); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("stale update: %v, want ErrConflict", err)
	}
	if _, _, err := s.Delete(ctx, "/k", r1); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("stale delete: %v, want ErrConflict", err)
	}
	kv, _ := s.Get(ctx, "/k")
	if string(kv.Value) != "v2" {
		t.Fatalf("a failed write changed the value: %q", kv.Value)
	}
}

func testList(t *testing.T, open Opener) {
	ctx := context.Background()
	s := openTemp(t, open, storage.HubOptions{})
	for i := 0; i < 25; i++ {
		mustCreate(t, s, fmt.Sprintf("/pods/ns1/p%02d", i))
	}
	mustCreate(t, s, "/pods/ns10/other")
	mustCreate(t, s, "/services/ns1/s")
	all, err := s.List(ctx, "/pods/ns1/", storage.ListOptions{})
	if err != nil || len(all.KVs) != 25 || all.More || all.Revision != s.Revision() {
		t.Fatalf("list: %d items more=%v rev=%d err=%v", len(all.KVs), all.More, all.Revision, err)
	}
	var got []string
	opts := storage.ListOptions{Limit: 10}
	for {
		page, err := s.List(ctx, "/pods/ns1/", opts)
		if err != nil {
			t.Fatalf("page: %v", err)
		}
		for _, kv := range page.KVs {
			got = append(got, kv.Key)
		}
		if !page.More {
			break
		}
		opts.StartKey = page.KVs[len(page.KVs)-1].Key + "\x00"
	}
	if len(got) != 25 || got[0] != "/pods/ns1/p00" || got[24] != "/pods/ns1/p24" {
		t.Fatalf("paged list: %d keys %v", len(got), got)
	}
}

func mustCreate(t *testing.T, s storage.Store, key string) int64 {
	t.Helper()
	rev, err := s.Create(context.Background(), key, []byte("v:"+key))
	if err != nil {
		t.Fatalf("create %s: %v", key, err)
	}
	return rev
}

func testConcurrentCreates(t *testing.T, open Opener) {
	s := openTemp(t, open, storage.HubOptions{History: 5000})
	const workers, each = 32, 40
	revs := make(chan int64, workers*each)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				rev, err := s.Create(context.Background(), fmt.Sprintf("/c/%d/%d", w, i), []byte("x"))
				if err != nil {
					t.Errorf("create: %v", err)
					return
				}
				revs <- rev
			}
		}()
	}
	wg.Wait()
	close(revs)
	seen := map[int64]bool{}
	for r := range revs {
		if seen[r] {
			t.Fatalf("revision %d given to two writes", r)
		}
		seen[r] = true
	}
	if len(seen) != workers*each {
		t.Fatalf("got %d revisions, want %d", len(seen), workers*each)
	}
}

// testConcurrentCAS increments a counter from many goroutines with
// compare-and-swap; no increment may be lost.
func testConcurrentCAS(t *testing.T, open Opener) {
	ctx := context.Background()
	s := openTemp(t, open, storage.HubOptions{})
	mustCreate(t, s, "/counter")
	const workers, each = 8, 25
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; {
				kv, err := s.Get(ctx, "/counter")
				if err != nil {
					t.Errorf("get: %v", err)
					return
				}
				val := append(append([]byte{}, kv.Value...), '+')
				if _, err := s.Update(ctx, "/counter", val, kv.ModRevision); errors.Is(err, storage.ErrConflict) {
					continue
				} else if err != nil {
					t.Errorf("update: %v", err)
					return
				}
				i++
			}
		}()
	}
	wg.Wait()
	kv, _ := s.Get(ctx, "/counter")
	want := len("v:/counter") + workers*each
	if len(kv.Value) != want {
		t.Fatalf("counter has %d bytes, want %d: increments were lost", len(kv.Value), want)
	}
}

func testWatchFromRevision(t *testing.T, open Opener) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := openTemp(t, open, storage.HubOptions{})
	mustCreate(t, s, "/first") // so that r1-1 is a real revision, not "from now"
	r1 := mustCreate(t, s, "/w/a")
	mustCreate(t, s, "/other/x")
	r2, _ := s.Update(ctx, "/w/a", []byte("new"), r1)
	w, err := s.Watch(ctx, "/w/", r1-1)
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()
	expectEvent(t, w, storage.Put, "/w/a", r1)
	expectEvent(t, w, storage.Put, "/w/a", r2)
	r3, _, _ := s.Delete(ctx, "/w/a", 0)
	ev := expectEvent(t, w, storage.Delete, "/w/a", r3)
	if string(ev.PrevValue) != "new" {
		t.Fatalf("delete event prev value %q", ev.PrevValue)
	}
	// A watch from "now" sees only later writes.
	w2, err := s.Watch(ctx, "/w/", 0)
	if err != nil {
		t.Fatalf("watch from now: %v", err)
	}
	defer w2.Stop()
	r4 := mustCreate(t, s, "/w/b")
	expectEvent(t, w2, storage.Put, "/w/b", r4)
	expectEvent(t, w, storage.Put, "/w/b", r4)
	// Stop closes the channel.
	w2.Stop()
	select {
	case _, ok := <-w2.Events():
		if ok {
			t.Fatalf("event after Stop")
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("channel not closed after Stop")
	}
}

func expectEvent(t *testing.T, w storage.Watcher, typ storage.EventType, key string, rev int64) storage.Event {
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
	case <-time.After(5 * time.Second):
		t.Fatalf("no event for %s@%d", key, rev)
	}
	return storage.Event{}
}

func testWatchCompacted(t *testing.T, open Opener) {
	ctx := context.Background()
	s := openTemp(t, open, storage.HubOptions{History: 10})
	first := mustCreate(t, s, "/h/0")
	for i := 1; i < 30; i++ {
		mustCreate(t, s, fmt.Sprintf("/h/%d", i))
	}
	if _, err := s.Watch(ctx, "/h/", first); !errors.Is(err, storage.ErrCompacted) {
		t.Fatalf("watch from evicted revision: %v, want ErrCompacted", err)
	}
	w, err := s.Watch(ctx, "/h/", s.Revision()-5)
	if err != nil {
		t.Fatalf("watch from recent revision: %v", err)
	}
	defer w.Stop()
	for i := 0; i < 5; i++ {
		expectEvent(t, w, storage.Put, fmt.Sprintf("/h/%d", 25+i), s.Revision()-4+int64(i))
	}
}

// testSlowWatcher checks that a watcher nobody reads is cut off and that
// writers keep going meanwhile.
func testSlowWatcher(t *testing.T, open Opener) {
	ctx := context.Background()
	s := openTemp(t, open, storage.HubOptions{MaxPending: 20})
	w, err := s.Watch(ctx, "/s/", 0)
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 500; i++ {
			mustCreate(t, s, fmt.Sprintf("/s/%d", i))
		}
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("writers blocked by a watcher that does not read")
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-w.Events():
			if !ok {
				if !errors.Is(w.Err(), storage.ErrTooSlow) {
					t.Fatalf("watch ended with %v, want ErrTooSlow", w.Err())
				}
				return
			}
		case <-deadline:
			t.Fatalf("slow watcher was never cut off")
		}
	}
}

func testReopen(t *testing.T, open Opener) {
	dir := t.TempDir()
	s := open(t, dir, storage.HubOptions{})
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				if _, err := s.Create(context.Background(), fmt.Sprintf("/r/%02d/%02d", w, i), []byte("v")); err != nil {
					t.Errorf("create: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	rev := s.Revision()
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, err := s.Create(context.Background(), "/after-close", nil); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("create after close: %v, want ErrClosed", err)
	}
	s2 := open(t, dir, storage.HubOptions{})
	defer s2.Close()
	if s2.Revision() != rev {
		t.Fatalf("revision after reopen %d, want %d", s2.Revision(), rev)
	}
	res, err := s2.List(context.Background(), "/r/", storage.ListOptions{})
	if err != nil || len(res.KVs) != 320 {
		t.Fatalf("after reopen: %d keys, err %v; want 320", len(res.KVs), err)
	}
	if _, err := s2.Watch(context.Background(), "/r/", rev-1); !errors.Is(err, storage.ErrCompacted) {
		t.Fatalf("watch into history lost at restart: %v, want ErrCompacted", err)
	}
	if r := mustCreate(t, s2, "/r/next"); r != rev+1 {
		t.Fatalf("first revision after reopen %d, want %d", r, rev+1)
	}
}
