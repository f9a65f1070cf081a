package etcd

import (
	"context"
	"fmt"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// compactKey is the key through which control planes sharing one etcd
// agree on who compacts; upstream's kube-apiserver uses the same key and
// the same protocol, so nodelet and kube-apiservers on one etcd take turns
// too. It lives outside the prefix because compaction is etcd-wide.
const compactKey = "compact_rev_key"

// compactor compacts etcd's history every interval, keeping about one
// interval of it: at each tick it compacts to the revision it saw at the
// previous tick.
//
// The key's version is a logical clock. At each tick a control plane
// tries to move it from the version it last saw (a compare-and-swap); the
// one that succeeds compacts, the others learn the new version and the
// current revision and only try again at their next tick. So several
// control planes compact about once per interval between them, never all.
type compactor struct {
	kv      clientv3.KV
	compact func(ctx context.Context, rev int64) error
	// version is compactKey's version when last seen; rev the etcd
	// revision at that moment, the next compaction's target.
	version, rev int64
}

// tick runs one round and reports the revision it compacted to (0: none).
func (c *compactor) tick(ctx context.Context) (int64, error) {
	resp, err := c.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.Version(compactKey), "=", c.version)).
		Then(clientv3.OpPut(compactKey, strconv.FormatInt(c.rev, 10))).
		Else(clientv3.OpGet(compactKey)).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("compare-and-swap %s: %w", compactKey, err)
	}
	target := c.rev
	c.rev = resp.Header.Revision
	if !resp.Succeeded {
		// Another control plane took this round.
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			c.version = kvs[0].Version
		}
		return 0, nil
	}
	c.version++
	if target == 0 {
		return 0, nil // the first round only learns a revision
	}
	if err := c.compact(ctx, target); err != nil && !isCompacted(err) {
		return 0, fmt.Errorf("compact to %d: %w", target, err)
	}
	return target, nil
}

// compactLoop runs the compactor until Close.
func (s *Store) compactLoop(interval time.Duration) {
	defer s.wg.Done()
	c := &compactor{kv: s.client, compact: func(ctx context.Context, rev int64) error {
		_, err := s.client.Compact(ctx, rev)
		return err
	}}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
		rev, err := c.tick(ctx)
		cancel()
		switch {
		case err != nil && s.ctx.Err() == nil:
			s.log.Warn("etcd compaction failed", "err", err)
		case rev > 0:
			s.log.Info("etcd compacted", "revision", rev)
		}
	}
}
