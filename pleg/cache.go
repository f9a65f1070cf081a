package pleg

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/runtime"
)

// Cache holds the latest runtime status of every pod with the time it was
// observed, as upstream's kubecontainer cache. A pod absent from the cache
// has no sandbox and no container (as of the cache's global timestamp).
type Cache struct {
	mu   sync.Mutex
	pods map[types.UID]cacheEntry
	// timestamp: every pod's record is at least this new (the start of the
	// last successful relist); zero before the first one.
	timestamp time.Time
	// changed is closed (and replaced) on every change, to wake waiters.
	changed chan struct{}
}

type cacheEntry struct {
	status   *runtime.PodStatus
	observed time.Time
}

// NewCache returns an empty cache.
func NewCache() *Cache {
	return &Cache{pods: map[types.UID]cacheEntry{}, changed: make(chan struct{})}
}

// Get returns the pod's latest status (an empty one, with only the UID,
// when the runtime has nothing of the pod) and when it was observed.
func (c *Cache) Get(uid types.UID) (*runtime.PodStatus, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.get(uid)
}

func (c *Cache) get(uid types.UID) (*runtime.PodStatus, time.Time) {
	if e, ok := c.pods[uid]; ok {
		return e.status, e.observed
	}
	return &runtime.PodStatus{UID: uid}, c.timestamp
}

// GetNewerThan blocks until the cache holds a status of the pod observed
// at or after minTime (its own record, or a relist that started at or
// after minTime and found nothing of it), or until ctx ends. The caller
// must not modify the returned status.
func (c *Cache) GetNewerThan(ctx context.Context, uid types.UID, minTime time.Time) (*runtime.PodStatus, error) {
	for {
		c.mu.Lock()
		st, observed := c.get(uid)
		if !observed.IsZero() && !observed.Before(minTime) {
			c.mu.Unlock()
			return st, nil
		}
		if !c.timestamp.IsZero() && !c.timestamp.Before(minTime) {
			c.mu.Unlock()
			return st, nil
		}
		changed := c.changed
		c.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for a runtime status of pod %s newer than %s: %w", uid, minTime.Format(time.RFC3339Nano), ctx.Err())
		}
	}
}

// Set records a pod's status observed at t.
func (c *Cache) Set(uid types.UID, st *runtime.PodStatus, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pods[uid] = cacheEntry{status: st, observed: t}
	c.notify()
}

// Delete forgets a pod (the runtime has nothing of it any more).
func (c *Cache) Delete(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pods, uid)
	c.notify()
}

// UpdateTime raises the global timestamp: every record is now known to be
// at least as new as t.
func (c *Cache) UpdateTime(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.timestamp) {
		c.timestamp = t
		c.notify()
	}
}

// UIDs returns the pods the cache has a record of.
func (c *Cache) UIDs() []types.UID {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]types.UID, 0, len(c.pods))
	for uid := range c.pods {
		out = append(out, uid)
	}
	return out
}

func (c *Cache) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}
