// Package etcd is the storage backend for control planes that keep their
// objects in an etcd v3 cluster (controlplane --etcd-servers), behind the
// same storage.Store contract as bbolt.
//
// Every key is stored under Config.Prefix ("/registry" by default, as
// upstream's kube-apiserver does). The revisions are etcd's: an object's
// resourceVersion is its mod_revision, and every response header moves
// Revision forward. Creates, updates and deletes are transactions that
// compare create_revision or mod_revision, so optimistic concurrency holds
// across several control planes writing to one etcd.
//
// Durability: a write is acknowledged only after etcd committed it through
// raft, i.e. after a quorum of members wrote it to their WAL and fsynced
// it; nothing here batches or delays that.
//
// Watches are served from a storage.Hub (the same fan-out and bounded
// history as bbolt's) fed by one etcd watch over the whole prefix, with
// previous values and progress notifications: the watch cache of upstream's
// kube-apiserver in small. A slow watcher is cut off by the hub and never
// slows the feed. A watch from a revision older than the hub's history
// fails with storage.ErrCompacted (HTTP 410), as does every open watch when
// the feed itself finds its next revision compacted in etcd.
//
// A compactor (compact.go) compacts etcd's history periodically, agreeing
// with other control planes through a compare-and-swap on one key so that
// only one of them compacts per period.
package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/nodelet/nodelet/controlplane/storage"
)

// DefaultPrefix is where objects live in etcd unless configured otherwise:
// upstream's --etcd-prefix default.
const DefaultPrefix = "/registry"

// DefaultCompactInterval is upstream's --etcd-compaction-interval default.
const DefaultCompactInterval = 5 * time.Minute

// Config configures a Store.
type Config struct {
	// Endpoints are the etcd client URLs (http:// or https://).
	Endpoints []string
	// CAFile, CertFile and KeyFile secure the connection: the CA that
	// signed etcd's serving certificates, and this client's certificate
	// and key. Empty for plain http endpoints.
	CAFile, CertFile, KeyFile string
	// Prefix is prepended to every key (DefaultPrefix when empty).
	Prefix string
	// CompactInterval is how often the compactor runs; 0 takes
	// DefaultCompactInterval, a negative value turns it off (another
	// control plane or etcd's own --auto-compaction compacts).
	CompactInterval time.Duration
	// DialTimeout bounds connecting at New (default 20 s).
	DialTimeout time.Duration
	Hub         storage.HubOptions
	Log         *slog.Logger
}

// Store implements storage.Store on etcd v3.
type Store struct {
	client *clientv3.Client
	prefix string
	hub    *storage.Hub
	log    *slog.Logger
	rev    atomic.Int64
	closed atomic.Bool
	// fed is how far the feed has filled the hub.
	fed *fedRevision
	// ctx ends the feed, the progress requests and the compactor at Close.
	ctx    context.Context
	cancel context.CancelFunc
	// feedCtx is the feed's watch context; progress requests must use it
	// (the client finds a watch stream by its context's metadata).
	feedCtx context.Context
	wg      sync.WaitGroup
	once    sync.Once
}

// New connects to etcd and starts the watch feed and the compactor. The
// hub's history starts empty at etcd's current revision: a watch from an
// earlier revision gets ErrCompacted, as after a restart of bbolt's store.
func New(cfg Config) (*Store, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("etcd: no endpoints")
	}
	ccfg := clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.DialTimeout,
		// The client logs through zap; our own log says what matters.
		Logger: zap.NewNop(),
		// Objects may be up to 1.5 MiB encoded; lists are paged.
		MaxCallRecvMsgSize: 64 << 20,
	}
	if ccfg.DialTimeout == 0 {
		ccfg.DialTimeout = 20 * time.Second
	}
	if cfg.CAFile != "" || cfg.CertFile != "" || cfg.KeyFile != "" {
		tlsInfo := transport.TLSInfo{TrustedCAFile: cfg.CAFile, CertFile: cfg.CertFile, KeyFile: cfg.KeyFile}
		tc, err := tlsInfo.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("etcd: client TLS: %w", err)
		}
		ccfg.TLS = tc
	}
	client, err := clientv3.New(ccfg)
	if err != nil {
		return nil, fmt.Errorf("etcd: connect %v: %w", cfg.Endpoints, err)
	}
	prefix := strings.TrimSuffix(cfg.Prefix, "/")
	if cfg.Prefix == "" {
		prefix = DefaultPrefix
	}
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	log = log.With("component", "storage", "backend", "etcd")
	// One read settles the starting revision and proves etcd answers.
	ctx, cancel := context.WithTimeout(context.Background(), ccfg.DialTimeout)
	resp, err := client.Get(ctx, prefix+"/", clientv3.WithCountOnly())
	cancel()
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("etcd: first read from %v: %w", cfg.Endpoints, err)
	}
	start := resp.Header.Revision
	s := &Store{client: client, prefix: prefix, log: log, hub: storage.NewHub(start, cfg.Hub), fed: newFedRevision(start)}
	s.rev.Store(start)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.feedCtx = clientv3.WithRequireLeader(s.ctx)
	s.wg.Add(1)
	go s.feed(start)
	interval := cfg.CompactInterval
	if interval == 0 {
		interval = DefaultCompactInterval
	}
	if interval > 0 {
		s.wg.Add(1)
		go s.compactLoop(interval)
	}
	return s, nil
}

// Revision is the newest etcd revision this store has seen: in the
// response to any of its requests, or from the feed.
func (s *Store) Revision() int64 { return s.rev.Load() }

// observe moves Revision forward to rev (never back).
func (s *Store) observe(rev int64) {
	for {
		cur := s.rev.Load()
		if rev <= cur || s.rev.CompareAndSwap(cur, rev) {
			return
		}
	}
}

// Get returns the value at key, read linearizably.
func (s *Store) Get(ctx context.Context, key string) (storage.KV, error) {
	if s.closed.Load() {
		return storage.KV{}, fmt.Errorf("get %q: %w", key, storage.ErrClosed)
	}
	resp, err := s.client.Get(ctx, s.prefix+key)
	if err != nil {
		return storage.KV{}, fmt.Errorf("get %q: %w", key, s.mapErr(err))
	}
	s.observe(resp.Header.Revision)
	if len(resp.Kvs) == 0 {
		return storage.KV{}, fmt.Errorf("get %q: %w", key, storage.ErrNotFound)
	}
	return s.kv(resp.Kvs[0].Key, resp.Kvs[0].Value, resp.Kvs[0].CreateRevision, resp.Kvs[0].ModRevision), nil
}

// List returns one page of the keys under prefix from opts.StartKey, read
// in one range request, i.e. at one revision: opts.Revision when set (the
// later pages of a list), else the latest. A revision etcd has compacted
// gives ErrCompacted.
func (s *Store) List(ctx context.Context, prefix string, opts storage.ListOptions) (storage.ListResult, error) {
	if s.closed.Load() {
		return storage.ListResult{}, fmt.Errorf("list %q: %w", prefix, storage.ErrClosed)
	}
	from := s.prefix + prefix
	if opts.StartKey != "" {
		from = s.prefix + opts.StartKey
	}
	ops := []clientv3.OpOption{clientv3.WithRange(clientv3.GetPrefixRangeEnd(s.prefix + prefix))}
	if opts.Limit > 0 {
		ops = append(ops, clientv3.WithLimit(int64(opts.Limit)))
	}
	if opts.Revision > 0 {
		ops = append(ops, clientv3.WithRev(opts.Revision))
	}
	resp, err := s.client.Get(ctx, from, ops...)
	if err != nil {
		return storage.ListResult{}, fmt.Errorf("list %q from %q at %d: %w", prefix, opts.StartKey, opts.Revision, s.mapErr(err))
	}
	s.observe(resp.Header.Revision)
	res := storage.ListResult{Revision: resp.Header.Revision, More: resp.More, KVs: make([]storage.KV, 0, len(resp.Kvs))}
	if opts.Revision > 0 {
		res.Revision = opts.Revision // the header holds the current one
	}
	for _, kv := range resp.Kvs {
		res.KVs = append(res.KVs, s.kv(kv.Key, kv.Value, kv.CreateRevision, kv.ModRevision))
	}
	return res, nil
}

// Create stores value at key if no key is there (create_revision == 0).
func (s *Store) Create(ctx context.Context, key string, value []byte) (int64, error) {
	if s.closed.Load() {
		return 0, fmt.Errorf("create %q: %w", key, storage.ErrClosed)
	}
	k := s.prefix + key
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, string(value))).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("create %q: %w", key, s.mapErr(err))
	}
	s.observe(resp.Header.Revision)
	if !resp.Succeeded {
		return 0, fmt.Errorf("create %q: %w", key, storage.ErrExists)
	}
	return resp.Header.Revision, nil
}

// Update replaces the value at key. expectedRevision > 0 must equal the
// key's mod_revision; 0 only requires the key to exist.
func (s *Store) Update(ctx context.Context, key string, value []byte, expectedRevision int64) (int64, error) {
	if s.closed.Load() {
		return 0, fmt.Errorf("update %q: %w", key, storage.ErrClosed)
	}
	k := s.prefix + key
	resp, err := s.client.Txn(ctx).
		If(condition(k, expectedRevision)).
		Then(clientv3.OpPut(k, string(value))).
		Else(clientv3.OpGet(k, clientv3.WithKeysOnly())).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("update %q: %w", key, s.mapErr(err))
	}
	s.observe(resp.Header.Revision)
	if !resp.Succeeded {
		return 0, fmt.Errorf("update %q at revision %d: %w", key, expectedRevision, failure(resp))
	}
	return resp.Header.Revision, nil
}

// Delete removes key, under the same condition as Update, and returns the
// revision of the delete and the value deleted.
func (s *Store) Delete(ctx context.Context, key string, expectedRevision int64) (int64, storage.KV, error) {
	if s.closed.Load() {
		return 0, storage.KV{}, fmt.Errorf("delete %q: %w", key, storage.ErrClosed)
	}
	k := s.prefix + key
	resp, err := s.client.Txn(ctx).
		If(condition(k, expectedRevision)).
		Then(clientv3.OpDelete(k, clientv3.WithPrevKV())).
		Else(clientv3.OpGet(k, clientv3.WithKeysOnly())).
		Commit()
	if err != nil {
		return 0, storage.KV{}, fmt.Errorf("delete %q: %w", key, s.mapErr(err))
	}
	s.observe(resp.Header.Revision)
	if !resp.Succeeded {
		return 0, storage.KV{}, fmt.Errorf("delete %q at revision %d: %w", key, expectedRevision, failure(resp))
	}
	rev := resp.Header.Revision
	del := resp.Responses[0].GetResponseDeleteRange()
	if del == nil || len(del.PrevKvs) == 0 {
		// The compare saw the key, so the delete removed it; etcd always
		// returns the previous value when asked.
		return rev, storage.KV{Key: key, ModRevision: rev}, nil
	}
	prev := del.PrevKvs[0]
	return rev, s.kv(prev.Key, prev.Value, prev.CreateRevision, rev), nil
}

// condition is the compare of a conditional write: the key's mod_revision
// equals expected, or (expected 0) the key exists at all.
func condition(key string, expected int64) clientv3.Cmp {
	if expected > 0 {
		return clientv3.Compare(clientv3.ModRevision(key), "=", expected)
	}
	return clientv3.Compare(clientv3.CreateRevision(key), ">", 0)
}

// failure says why a conditional write's compare failed, from its Else
// branch's read of the key: missing, or at another revision.
func failure(resp *clientv3.TxnResponse) error {
	if len(resp.Responses) > 0 {
		if r := resp.Responses[0].GetResponseRange(); r != nil && len(r.Kvs) > 0 {
			return storage.ErrConflict
		}
	}
	return storage.ErrNotFound
}

// Watch streams changes under prefix after fromRevision from the hub. From
// "now" (0) is the newest revision this store has seen. The watch first
// waits (up to freshWait) for the feed to reach that revision, so that a
// watch following a write is judged against a history holding it.
func (s *Store) Watch(ctx context.Context, prefix string, fromRevision int64) (storage.Watcher, error) {
	if s.closed.Load() {
		return nil, fmt.Errorf("watch %q: %w", prefix, storage.ErrClosed)
	}
	if err := s.waitFresh(ctx); err != nil {
		return nil, fmt.Errorf("watch %q: %w", prefix, err)
	}
	if fromRevision == 0 {
		fromRevision = s.Revision()
	}
	w, err := s.hub.Watch(ctx, prefix, fromRevision)
	if err != nil {
		return nil, fmt.Errorf("watch %q from %d: %w", prefix, fromRevision, err)
	}
	return w, nil
}

// Close stops the feed and the compactor, ends every watch with ErrClosed
// and closes the client. Requests made after it fail with ErrClosed.
func (s *Store) Close() error {
	var err error
	s.once.Do(func() {
		s.closed.Store(true)
		s.cancel()
		s.wg.Wait()
		s.hub.Close()
		err = s.client.Close()
	})
	return err
}

// kv makes a storage KV of an etcd key (which carries the prefix).
func (s *Store) kv(key, value []byte, create, mod int64) storage.KV {
	return storage.KV{Key: strings.TrimPrefix(string(key), s.prefix), Value: value, CreateRevision: create, ModRevision: mod}
}

// mapErr turns etcd's "compacted" into storage.ErrCompacted and an error
// of a client closed under a request into storage.ErrClosed, keeping the
// original in the chain.
func (s *Store) mapErr(err error) error {
	if s.closed.Load() {
		return fmt.Errorf("%w: %w", storage.ErrClosed, err)
	}
	if isCompacted(err) {
		return fmt.Errorf("%w: %w", storage.ErrCompacted, err)
	}
	return err
}
