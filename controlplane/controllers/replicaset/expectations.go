package replicaset

import (
	"sync"
	"time"
)

// ExpectationsTimeout is how long a controller trusts its expectations. After
// it, a sync acts on whatever the informer shows, so a lost watch event
// delays a ReplicaSet by at most this long instead of wedging it forever.
const ExpectationsTimeout = 5 * time.Minute

// expectations records, per ReplicaSet key, the pod creations and deletions
// the controller issued but has not yet seen through the pod informer. While
// any are outstanding the cache is known to be behind the controller's own
// writes, and a sync must not act on it (it would create or delete again).
//
// Deletions are tracked by pod key, so a deletion is counted once whether the
// informer first shows it as a deletionTimestamp update or as a delete.
type expectations struct {
	now func() time.Time

	mu  sync.Mutex
	set map[string]*expectation
}

type expectation struct {
	add, del  int64
	deleteSet map[string]struct{}
	at        time.Time
}

func newExpectations(now func() time.Time) *expectations {
	if now == nil {
		now = time.Now
	}
	return &expectations{now: now, set: map[string]*expectation{}}
}

// Satisfied reports whether a sync for key may act: no expectations were
// recorded, all were observed, or they expired.
func (e *expectations) Satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.set[key]
	if !ok {
		return true
	}
	if x.add <= 0 && x.del <= 0 {
		return true
	}
	return e.now().Sub(x.at) > ExpectationsTimeout
}

// ExpectCreations replaces key's expectations with n pending creations.
func (e *expectations) ExpectCreations(key string, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.set[key] = &expectation{add: int64(n), at: e.now()}
}

// ExpectDeletions replaces key's expectations with the deletion of podKeys.
func (e *expectations) ExpectDeletions(key string, podKeys []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := &expectation{del: int64(len(podKeys)), deleteSet: make(map[string]struct{}, len(podKeys)), at: e.now()}
	for _, k := range podKeys {
		x.deleteSet[k] = struct{}{}
	}
	e.set[key] = x
}

// CreationObserved lowers key's pending creations by one. It is called both
// for pods seen by the informer and for creations that were never issued or
// failed, which the informer will never show.
func (e *expectations) CreationObserved(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.set[key]; ok {
		x.add--
	}
}

// DeletionObserved lowers key's pending deletions if podKey was one of them;
// a second observation of the same pod is ignored.
func (e *expectations) DeletionObserved(key, podKey string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.set[key]
	if !ok {
		return
	}
	if _, pending := x.deleteSet[podKey]; pending {
		delete(x.deleteSet, podKey)
		x.del--
	}
}

// Delete forgets key (its ReplicaSet is gone).
func (e *expectations) Delete(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.set, key)
}
