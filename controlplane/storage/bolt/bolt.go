// Package bolt is the default storage backend: one bbolt file, a single
// global revision, and group commit so that concurrent writers share fsyncs
// without any write being acknowledged before it is durable.
package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/nodelet/nodelet/controlplane/storage"
)

var (
	bucketKV   = []byte("kv")
	bucketMeta = []byte("meta")
	keyRev     = []byte("revision")
)

// header is createRevision and modRevision, big-endian, before each value.
const header = 16

// maxBatch bounds one group commit so a flood of writers still gets replies
// at a steady pace.
const maxBatch = 2048

// Config configures a Store.
type Config struct {
	// Path of the bbolt file; its directory is created if missing.
	Path string
	Hub  storage.HubOptions
	Log  *slog.Logger
}

// Store implements storage.Store on bbolt.
type Store struct {
	db     *bolt.DB
	hub    *storage.Hub
	log    *slog.Logger
	rev    atomic.Int64
	reqs   chan *writeReq
	stop   chan struct{}
	done   chan struct{}
	closed sync.Once
	// enqueue guards handing requests to the committer against Close: once
	// shutting is set no request enters reqs, so the committer's final
	// drain answers every request that did.
	enqueue  sync.RWMutex
	shutting bool
	// commitStart is when the commit in progress began (Unix
	// nanoseconds), 0 between commits: Check reads it.
	commitStart atomic.Int64
}

type opKind int

const (
	opCreate opKind = iota
	opUpdate
	opDelete
)

type writeReq struct {
	op       opKind
	key      string
	value    []byte
	expected int64
	reply    chan writeResult
}

type writeResult struct {
	rev  int64
	prev storage.KV
	err  error
}

// Open opens (or creates) the store at cfg.Path.
func Open(cfg Config) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(cfg.Path), 0o700); err != nil {
		return nil, fmt.Errorf("create storage dir: %w", err)
	}
	db, err := bolt.Open(cfg.Path, 0o600, &bolt.Options{
		Timeout:         5 * time.Second,
		NoFreelistSync:  true,
		FreelistType:    bolt.FreelistMapType,
		InitialMmapSize: 256 << 20,
	})
	if err != nil {
		return nil, fmt.Errorf("open bbolt %s: %w", cfg.Path, err)
	}
	var rev int64
	err = db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(bucketKV); err != nil {
			return err
		}
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		if v := meta.Get(keyRev); v != nil {
			rev = int64(binary.BigEndian.Uint64(v))
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("initialise bbolt %s: %w", cfg.Path, err)
	}
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	s := &Store{
		db:   db,
		hub:  storage.NewHub(rev, cfg.Hub),
		log:  log.With("component", "storage"),
		reqs: make(chan *writeReq, maxBatch),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	s.rev.Store(rev)
	go s.commitLoop()
	return s, nil
}

// Revision returns the last committed revision.
func (s *Store) Revision() int64 { return s.rev.Load() }

// Get returns the value at key.
func (s *Store) Get(ctx context.Context, key string) (storage.KV, error) {
	var kv storage.KV
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketKV).Get([]byte(key))
		if v == nil {
			return storage.ErrNotFound
		}
		kv = decode(key, v)
		return nil
	})
	if err != nil {
		return storage.KV{}, fmt.Errorf("get %q: %w", key, err)
	}
	return kv, nil
}

// List returns the values under prefix, read in one transaction at one
// revision: the latest, whatever opts.Revision asks (bbolt keeps no old
// versions).
func (s *Store) List(ctx context.Context, prefix string, opts storage.ListOptions) (storage.ListResult, error) {
	var res storage.ListResult
	start := []byte(prefix)
	if opts.StartKey != "" {
		start = []byte(opts.StartKey)
	}
	p := []byte(prefix)
	err := s.db.View(func(tx *bolt.Tx) error {
		res.Revision = readRev(tx)
		c := tx.Bucket(bucketKV).Cursor()
		for k, v := c.Seek(start); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
			if opts.Limit > 0 && len(res.KVs) == opts.Limit {
				res.More = true
				break
			}
			res.KVs = append(res.KVs, decode(string(k), v))
		}
		return nil
	})
	if err != nil {
		return storage.ListResult{}, fmt.Errorf("list %q: %w", prefix, err)
	}
	return res, nil
}

// Create stores value at key, failing with ErrExists if the key is present.
func (s *Store) Create(ctx context.Context, key string, value []byte) (int64, error) {
	r, err := s.write(ctx, &writeReq{op: opCreate, key: key, value: value})
	return r.rev, err
}

// Update replaces the value at key; expectedRevision > 0 makes it conditional.
func (s *Store) Update(ctx context.Context, key string, value []byte, expectedRevision int64) (int64, error) {
	r, err := s.write(ctx, &writeReq{op: opUpdate, key: key, value: value, expected: expectedRevision})
	return r.rev, err
}

// Delete removes key; expectedRevision > 0 makes it conditional.
func (s *Store) Delete(ctx context.Context, key string, expectedRevision int64) (int64, storage.KV, error) {
	r, err := s.write(ctx, &writeReq{op: opDelete, key: key, expected: expectedRevision})
	return r.rev, r.prev, err
}

// Watch streams changes under prefix after fromRevision.
func (s *Store) Watch(ctx context.Context, prefix string, fromRevision int64) (storage.Watcher, error) {
	w, err := s.hub.Watch(ctx, prefix, fromRevision)
	if err != nil {
		return nil, fmt.Errorf("watch %q from %d: %w", prefix, fromRevision, err)
	}
	return w, nil
}

// Close stops the committer, ends all watches and closes the file. Writes
// already acknowledged are on disk; writes still queued fail with ErrClosed.
func (s *Store) Close() error {
	var err error
	s.closed.Do(func() {
		s.enqueue.Lock()
		s.shutting = true
		s.enqueue.Unlock()
		close(s.stop)
		<-s.done
		s.hub.Close()
		err = s.db.Close()
	})
	return err
}

// write hands a request to the committer and waits for its durable result.
// Once handed over, the request is committed or failed even if ctx ends, so
// a caller that gives up never leaves the outcome ambiguous for others.
func (s *Store) write(ctx context.Context, req *writeReq) (writeResult, error) {
	req.reply = make(chan writeResult, 1)
	s.enqueue.RLock()
	if s.shutting {
		s.enqueue.RUnlock()
		return writeResult{}, storage.ErrClosed
	}
	select {
	case s.reqs <- req:
	case <-ctx.Done():
		s.enqueue.RUnlock()
		return writeResult{}, ctx.Err()
	}
	s.enqueue.RUnlock()
	r := <-req.reply
	if r.err != nil {
		return r, fmt.Errorf("%s %q: %w", req.op, req.key, r.err)
	}
	return r, nil
}

func (o opKind) String() string {
	switch o {
	case opCreate:
		return "create"
	case opUpdate:
		return "update"
	default:
		return "delete"
	}
}
