package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodelet/nodelet/controlplane/storage"
)

// progressEvery is how often the feed asks etcd for a progress
// notification, so that Revision follows etcd's revision while nothing
// under the prefix changes (writes of other prefixes, or of nothing).
const progressEvery = 5 * time.Second

// freshWait bounds how long a new watch waits for the feed to catch up
// with the store's revision (upstream's watch cache waits 3 s as well).
const freshWait = 3 * time.Second

// fedRevision is how far the feed has published: every event up to rev is
// in the hub. Waiters are woken by closing ch.
type fedRevision struct {
	mu  sync.Mutex
	rev int64
	ch  chan struct{}
}

func newFedRevision(rev int64) *fedRevision {
	return &fedRevision{rev: rev, ch: make(chan struct{})}
}

func (f *fedRevision) advance(rev int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if rev > f.rev {
		f.rev = rev
		close(f.ch)
		f.ch = make(chan struct{})
	}
}

// wait returns once the feed has reached rev, or ctx's error.
func (f *fedRevision) wait(ctx context.Context, rev int64) error {
	for {
		f.mu.Lock()
		cur, ch := f.rev, f.ch
		f.mu.Unlock()
		if cur >= rev {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("watch feed at revision %d, waiting for %d: %w", cur, rev, ctx.Err())
		}
	}
}

// waitFresh waits until the hub holds every event up to the newest
// revision this store has seen, so that a watch starting after a write
// (this store's or, through a read, another's) is judged against a history
// that contains it. A progress request makes etcd confirm a revision that
// no event of the prefix carries.
func (s *Store) waitFresh(ctx context.Context) error {
	rev := s.Revision()
	if s.fed.wait(expired, rev) == nil {
		return nil
	}
	// Best effort: without the notification the next event or the
	// periodic request moves the feed on.
	_ = s.client.RequestProgress(s.feedCtx)
	ctx, cancel := context.WithTimeout(ctx, freshWait)
	defer cancel()
	return s.fed.wait(ctx, rev)
}

// expired is a context that has ended: fedRevision.wait with it only looks.
var expired = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// feed watches the whole prefix from revision after+1 and publishes every
// event to the hub in revision order, until Close. The client reconnects
// by itself after transport errors; a watch that ends otherwise is started
// again from the last revision published, after a pause. When that
// revision has been compacted in etcd, the events in between are lost to
// the hub: every watch ends with ErrCompacted (clients relist, as after a
// 410) and the hub starts over at etcd's current revision.
func (s *Store) feed(after int64) {
	defer s.wg.Done()
	// The watch and the progress requests share one context: the client
	// finds a watch stream by its context's metadata.
	ctx := s.feedCtx
	s.wg.Add(1)
	go s.requestProgress(ctx)
	for ctx.Err() == nil {
		var err error
		after, err = s.watchFrom(ctx, after)
		if ctx.Err() != nil {
			return
		}
		if isCompacted(err) {
			after = s.restart(ctx, after)
			continue
		}
		s.log.Warn("etcd watch ended; watching again", "after", after, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// watchFrom runs one etcd watch and returns the last revision it
// published and why the watch ended.
func (s *Store) watchFrom(ctx context.Context, after int64) (int64, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch := s.client.Watch(wctx, s.prefix+"/", clientv3.WithPrefix(), clientv3.WithRev(after+1),
		clientv3.WithPrevKV(), clientv3.WithProgressNotify())
	for resp := range wch {
		if err := resp.Err(); err != nil {
			return after, err
		}
		s.observe(resp.Header.Revision)
		if resp.IsProgressNotify() {
			// Every event up to the header's revision has been sent.
			s.fed.advance(resp.Header.Revision)
			continue
		}
		if len(resp.Events) == 0 {
			continue // the watch was created
		}
		events := make([]storage.Event, 0, len(resp.Events))
		for _, ev := range resp.Events {
			events = append(events, s.event(ev))
		}
		s.hub.Publish(events)
		after = events[len(events)-1].KV.ModRevision
		s.fed.advance(after)
	}
	return after, ctx.Err()
}

// restart ends every watch with ErrCompacted and returns the revision the
// feed goes on from: etcd's current one.
func (s *Store) restart(ctx context.Context, after int64) int64 {
	for ctx.Err() == nil {
		resp, err := s.client.Get(ctx, s.prefix+"/", clientv3.WithCountOnly())
		if err == nil {
			rev := resp.Header.Revision
			s.log.Warn("etcd compacted past the watch feed; ending every watch", "after", after, "now", rev)
			s.observe(rev)
			s.hub.Reset(rev, storage.ErrCompacted)
			s.fed.advance(rev)
			return rev
		}
		s.log.Warn("etcd read after a compacted watch failed", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return after
}

func (s *Store) requestProgress(ctx context.Context) {
	defer s.wg.Done()
	t := time.NewTicker(progressEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			// Best effort: a missed notification only delays Revision.
			_ = s.client.RequestProgress(ctx)
		}
	}
}

// event converts one etcd event. A delete's KV holds the last value and
// the delete's revision, as the storage contract says.
func (s *Store) event(ev *clientv3.Event) storage.Event {
	out := storage.Event{Type: storage.Put}
	if ev.PrevKv != nil {
		out.PrevValue = ev.PrevKv.Value
	}
	kv := ev.Kv
	if ev.Type == clientv3.EventTypeDelete {
		out.Type = storage.Delete
		out.KV = s.kv(kv.Key, out.PrevValue, 0, kv.ModRevision)
		if ev.PrevKv != nil {
			out.KV.CreateRevision = ev.PrevKv.CreateRevision
		}
		return out
	}
	out.KV = s.kv(kv.Key, kv.Value, kv.CreateRevision, kv.ModRevision)
	return out
}

func isCompacted(err error) bool {
	return errors.Is(err, rpctypes.ErrCompacted)
}
