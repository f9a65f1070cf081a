package apiserver

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/controlplane/storage"
)

// DefaultEventTTL is how long an Event is kept after it was last
// recorded, upstream's --event-ttl.
const DefaultEventTTL = time.Hour

// Events expire as upstream's do, where each write of an Event renews an
// etcd lease of --event-ttl: here a sweep every eventSweepEvery deletes
// the Events not recorded again within the TTL (their newest of
// creationTimestamp, lastTimestamp, eventTime and series.lastObservedTime;
// the timestamps are the recorders', which set them at each write). The
// deletes go through the store like any other, so watchers see them.
const (
	eventSweepEvery = time.Minute
	eventSweepPage  = 500
)

// lastRecorded is when ev was last recorded.
func lastRecorded(ev *corev1.Event) time.Time {
	t := ev.CreationTimestamp.Time
	for _, u := range []time.Time{ev.LastTimestamp.Time, ev.EventTime.Time} {
		if u.After(t) {
			t = u
		}
	}
	if ev.Series != nil && ev.Series.LastObservedTime.After(t) {
		t = ev.Series.LastObservedTime.Time
	}
	return t
}

// runEventTTL sweeps until ctx ends, every eventSweepEvery or every TTL
// when that is shorter.
func (s *Server) runEventTTL(ctx context.Context, ttl time.Duration) {
	tick := time.NewTicker(min(eventSweepEvery, ttl))
	defer tick.Stop()
	for {
		if n, err := s.expireEvents(ctx, time.Now().Add(-ttl)); err != nil && ctx.Err() == nil {
			s.log.Warn("expire events", "err", err)
		} else if n > 0 {
			s.log.Debug("expired events", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// expireEvents deletes the Events last recorded before cutoff, a page at
// a time, each only if unchanged since it was read.
func (s *Server) expireEvents(ctx context.Context, cutoff time.Time) (int, error) {
	res := s.Resource("", "events")
	if res == nil {
		return 0, nil
	}
	prefix := resourcePrefix(res)
	opts := storage.ListOptions{Limit: eventSweepPage}
	deleted := 0
	for {
		page, err := s.store.List(ctx, prefix, opts)
		if err != nil {
			return deleted, err
		}
		for _, kv := range page.KVs {
			obj, err := s.codec.decode(res, kv)
			if err != nil {
				s.log.Warn("expire events: undecodable event", "key", kv.Key, "err", err)
				continue
			}
			ev, ok := obj.(*corev1.Event)
			if !ok || !lastRecorded(ev).Before(cutoff) {
				continue
			}
			_, _, err = s.store.Delete(ctx, kv.Key, kv.ModRevision)
			switch {
			case err == nil:
				deleted++
			case errors.Is(err, storage.ErrConflict), errors.Is(err, storage.ErrNotFound):
				// Recorded again, or gone, since the read.
			default:
				return deleted, err
			}
		}
		if !page.More || len(page.KVs) == 0 {
			return deleted, nil
		}
		opts.StartKey = page.KVs[len(page.KVs)-1].Key + "\x00"
	}
}
