package bolt

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/nodelet/nodelet/controlplane/storage"
)

// commitLoop is the only writer. It takes every request that is waiting,
// applies them in one bbolt transaction (one fsync for all of them), then
// publishes the events and replies. Requests that arrive during the fsync
// form the next batch: group commit without any added delay.
func (s *Store) commitLoop() {
	defer close(s.done)
	batch := make([]*writeReq, 0, maxBatch)
	for {
		select {
		case <-s.stop:
			s.failPending()
			return
		case req := <-s.reqs:
			batch = append(batch[:0], req)
		}
	drain:
		for len(batch) < maxBatch {
			select {
			case req := <-s.reqs:
				batch = append(batch, req)
			default:
				break drain
			}
		}
		s.commit(batch)
	}
}

func (s *Store) failPending() {
	for {
		select {
		case req := <-s.reqs:
			req.reply <- writeResult{err: storage.ErrClosed}
		default:
			return
		}
	}
}

func (s *Store) commit(batch []*writeReq) {
	s.commitStart.Store(time.Now().UnixNano())
	defer s.commitStart.Store(0)
	results := make([]writeResult, len(batch))
	var events []storage.Event
	err := s.db.Update(func(tx *bolt.Tx) error {
		events = events[:0]
		b := tx.Bucket(bucketKV)
		rev := readRev(tx)
		for i, req := range batch {
			ev, err := apply(b, req, rev+1)
			results[i] = writeResult{err: err}
			if err != nil {
				continue
			}
			rev++
			results[i].rev = rev
			if ev.Type == storage.Delete {
				results[i].prev = ev.KV
			}
			events = append(events, ev)
		}
		var buf [8]byte
		binary.BigEndian.PutUint64(buf[:], uint64(rev))
		return tx.Bucket(bucketMeta).Put(keyRev, buf[:])
	})
	if err != nil {
		s.log.Error("commit failed", "writes", len(batch), "err", err)
		for _, req := range batch {
			req.reply <- writeResult{err: fmt.Errorf("commit: %w", err)}
		}
		return
	}
	if len(events) > 0 {
		s.rev.Store(events[len(events)-1].KV.ModRevision)
		s.hub.Publish(events)
	}
	for i, req := range batch {
		req.reply <- results[i]
	}
}

// apply performs one request inside the batch transaction at revision rev.
func apply(b *bolt.Bucket, req *writeReq, rev int64) (storage.Event, error) {
	key := []byte(req.key)
	old := b.Get(key)
	switch req.op {
	case opCreate:
		if old != nil {
			return storage.Event{}, storage.ErrExists
		}
		kv := storage.KV{Key: req.key, Value: req.value, CreateRevision: rev, ModRevision: rev}
		return storage.Event{Type: storage.Put, KV: kv}, b.Put(key, encode(kv))
	case opUpdate:
		if old == nil {
			return storage.Event{}, storage.ErrNotFound
		}
		prev := decode(req.key, old)
		if req.expected > 0 && prev.ModRevision != req.expected {
			return storage.Event{}, storage.ErrConflict
		}
		kv := storage.KV{Key: req.key, Value: req.value, CreateRevision: prev.CreateRevision, ModRevision: rev}
		return storage.Event{Type: storage.Put, KV: kv, PrevValue: prev.Value}, b.Put(key, encode(kv))
	default:
		if old == nil {
			return storage.Event{}, storage.ErrNotFound
		}
		prev := decode(req.key, old)
		if req.expected > 0 && prev.ModRevision != req.expected {
			return storage.Event{}, storage.ErrConflict
		}
		kv := storage.KV{Key: req.key, Value: prev.Value, CreateRevision: prev.CreateRevision, ModRevision: rev}
		return storage.Event{Type: storage.Delete, KV: kv, PrevValue: prev.Value}, b.Delete(key)
	}
}

func readRev(tx *bolt.Tx) int64 {
	v := tx.Bucket(bucketMeta).Get(keyRev)
	if v == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(v))
}

func encode(kv storage.KV) []byte {
	buf := make([]byte, header+len(kv.Value))
	binary.BigEndian.PutUint64(buf[0:8], uint64(kv.CreateRevision))
	binary.BigEndian.PutUint64(buf[8:16], uint64(kv.ModRevision))
	copy(buf[header:], kv.Value)
	return buf
}

// decode copies the value out of bbolt's mmap, which is only valid inside
// the transaction.
func decode(key string, v []byte) storage.KV {
	val := make([]byte, len(v)-header)
	copy(val, v[header:])
	return storage.KV{
		Key:            key,
		Value:          val,
		CreateRevision: int64(binary.BigEndian.Uint64(v[0:8])),
		ModRevision:    int64(binary.BigEndian.Uint64(v[8:16])),
	}
}

// commitStallAfter is how long one commit (one bbolt transaction and its
// fsync, normally milliseconds) may run before Check calls the store
// unhealthy.
const commitStallAfter = 10 * time.Second

// Check reports the store unhealthy when it is closed, when a commit has
// run longer than commitStallAfter, or when a read transaction cannot be
// had before ctx ends.
func (s *Store) Check(ctx context.Context) error {
	select {
	case <-s.done:
		return storage.ErrClosed
	default:
	}
	if start := s.commitStart.Load(); start != 0 {
		if d := time.Since(time.Unix(0, start)); d > commitStallAfter {
			return fmt.Errorf("a commit has been running for %s", d.Round(time.Second))
		}
	}
	read := make(chan error, 1)
	go func() {
		read <- s.db.View(func(tx *bolt.Tx) error {
			if tx.Bucket(bucketMeta) == nil {
				return fmt.Errorf("no meta bucket")
			}
			return nil
		})
	}()
	select {
	case err := <-read:
		if err != nil {
			return fmt.Errorf("storage read: %w", err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("storage read: %w", ctx.Err())
	}
}
