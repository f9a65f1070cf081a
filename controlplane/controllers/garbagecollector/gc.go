// Package garbagecollector deletes objects whose owners are gone and
// carries out the orphan and foreground deletion propagation policies, for
// every resource the API server serves.
//
// Design (a much smaller cousin of upstream's):
//   - one metadata informer ("monitor") per resource found by discovery,
//     rediscovered every ResyncPeriod;
//   - the informer handlers keep an owner→dependents graph keyed by UID and
//     put UIDs on two rate-limited queues: attemptToDelete (is this object's
//     every owner gone? is this foreground-deleting owner done?) and
//     attemptToOrphan (strip references to an owner deleted with Orphan);
//   - workers decide from live GETs, never from the informer caches alone,
//     and delete with a UID (and resourceVersion) precondition.
package garbagecollector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nodelet/nodelet/controlplane/controllers/keyqueue"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
)

// Config configures the garbage collector.
type Config struct {
	Metadata  metadata.Interface
	Discovery discovery.DiscoveryInterface
	// Recorder receives warning events about invalid ownerReferences
	// (optional).
	Recorder record.EventRecorder
	Log      *slog.Logger
	// ResyncPeriod is how often resources are rediscovered (default 30s).
	ResyncPeriod time.Duration
	// IgnoredResources are never watched (default DefaultIgnoredResources).
	IgnoredResources []schema.GroupResource
}

// Controller is the garbage collector.
type Controller struct {
	cfg      Config
	log      *slog.Logger
	mapper   *restmapper.DeferredDiscoveryRESTMapper
	graph    *graph
	monitors monitorSet
	absent   *absentCache

	attemptToDelete workqueue.TypedRateLimitingInterface[types.UID]
	attemptToOrphan workqueue.TypedRateLimitingInterface[types.UID]
}

// New validates cfg and builds a collector; Run starts it.
func New(cfg Config) (*Controller, error) {
	if cfg.Metadata == nil || cfg.Discovery == nil {
		return nil, errors.New("garbagecollector: Metadata and Discovery are required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.ResyncPeriod <= 0 {
		cfg.ResyncPeriod = 30 * time.Second
	}
	if cfg.IgnoredResources == nil {
		cfg.IgnoredResources = DefaultIgnoredResources()
	}
	newQueue := func(name string) workqueue.TypedRateLimitingInterface[types.UID] {
		return workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[types.UID](),
			workqueue.TypedRateLimitingQueueConfig[types.UID]{Name: name})
	}
	return &Controller{
		cfg:             cfg,
		log:             cfg.Log.With("controller", "garbagecollector"),
		mapper:          restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cfg.Discovery)),
		graph:           newGraph(),
		monitors:        monitorSet{m: map[schema.GroupVersionResource]*monitor{}},
		absent:          newAbsentCache(10000),
		attemptToDelete: newQueue("garbage_collector_attempt_to_delete"),
		attemptToOrphan: newQueue("garbage_collector_attempt_to_orphan"),
	}, nil
}

// Run watches every collectable resource, waits until all are listed,
// then runs workers on each queue until ctx ends. It fails only if the
// first discovery fails.
func (c *Controller) Run(ctx context.Context, workers int) error {
	defer c.attemptToDelete.ShutDown()
	defer c.attemptToOrphan.ShutDown()
	defer c.stopMonitors()
	if workers < 1 {
		workers = 1
	}
	if err := c.resync(ctx); err != nil {
		return err
	}
	c.log.Info("waiting for monitors to sync", "resources", len(c.allMonitors()))
	if !cache.WaitForCacheSync(ctx.Done(), synced(c.allMonitors())) {
		return nil // ctx ended
	}
	c.log.Info("started", "workers", workers, "nodes", c.graph.len())

	var wg sync.WaitGroup
	for range workers {
		wg.Add(2)
		go func() { defer wg.Done(); keyqueue.Work(ctx, c.attemptToDelete, c.processAttemptToDelete, c.log) }()
		go func() { defer wg.Done(); keyqueue.Work(ctx, c.attemptToOrphan, c.processAttemptToOrphan, c.log) }()
	}
	ticker := time.NewTicker(c.cfg.ResyncPeriod)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			c.attemptToDelete.ShutDown()
			c.attemptToOrphan.ShutDown()
			wg.Wait()
			return nil
		case <-ticker.C:
			if err := c.resync(ctx); err != nil {
				c.log.Error("resync resources", "err", err)
			}
		}
	}
}

// resync rediscovers resources, forgets cached REST mappings and starts or
// stops monitors to match.
func (c *Controller) resync(ctx context.Context) error {
	c.mapper.Reset()
	want, partial, err := c.discover()
	if err != nil {
		return err
	}
	if started := c.syncMonitors(ctx, want, partial); len(started) > 0 {
		c.log.Info("started monitors", "count", len(started))
	}
	return nil
}

// errNotObserved asks for a retry: the object exists but no informer has
// reported it yet, so the graph does not know its dependents.
var errNotObserved error = notObserved{}

// notObserved is a keyqueue.Retrier: expected while informers catch up.
type notObserved struct{}

func (notObserved) Error() string             { return "garbagecollector: object not yet observed by an informer" }
func (notObserved) RetryAfter() time.Duration { return 0 }

// apply queues the work a graph change asked for.
func (c *Controller) apply(eff effects) {
	for _, uid := range eff.attemptToDelete {
		c.attemptToDelete.Add(uid)
	}
	for _, uid := range eff.attemptToOrphan {
		c.attemptToOrphan.Add(uid)
	}
}

// resourceFor maps id's apiVersion and kind to its resource and reports
// whether the kind is namespaced.
func (c *Controller) resourceFor(id objectID) (metadata.ResourceInterface, bool, error) {
	gv, err := schema.ParseGroupVersion(id.APIVersion)
	if err != nil {
		return nil, false, fmt.Errorf("parse apiVersion of %s: %w", id, err)
	}
	m, err := c.mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: id.Kind}, gv.Version)
	if err != nil {
		return nil, false, fmt.Errorf("map kind of %s: %w", id, err)
	}
	namespaced := m.Scope.Name() == meta.RESTScopeNameNamespace
	if namespaced {
		return c.cfg.Metadata.Resource(m.Resource).Namespace(id.Namespace), true, nil
	}
	return c.cfg.Metadata.Resource(m.Resource), false, nil
}

// absentCache remembers owners known to be gone, so that the dependents
// of one deleted owner cost one lookup, not one each. UIDs are never
// reused, so an entry never goes stale; the cache is simply cleared when
// it fills.
type absentCache struct {
	mu  sync.Mutex
	max int
	m   map[objectID]struct{}
}

func newAbsentCache(max int) *absentCache {
	return &absentCache{max: max, m: map[objectID]struct{}{}}
}

func (a *absentCache) add(id objectID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.m) >= a.max {
		a.m = map[objectID]struct{}{}
	}
	a.m[id] = struct{}{}
}

func (a *absentCache) has(id objectID) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.m[id]
	return ok
}
