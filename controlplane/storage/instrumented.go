package storage

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Instrumented wraps a Store with Prometheus metrics under etcd-equivalent
// names, so kube-apiserver dashboards read this control plane too:
//   - etcd_request_duration_seconds{operation,type}: latency of each call,
//     type being the resource (the key's first segment, "pods",
//     "deployments.apps").
//   - apiserver_storage_objects{resource}: objects stored per resource,
//     counted once by CountObjects and then kept up to date from this
//     wrapper's own successful creates and deletes, so a scrape never lists
//     the store. Every write goes through the wrapper, so the count stays
//     exact as long as CountObjects ran before the first write.
type Instrumented struct {
	Store
	duration *prometheus.HistogramVec
	objects  *prometheus.GaugeVec

	mu        sync.Mutex
	observers map[opType]prometheus.Observer
}

type opType struct{ op, typ string }

// Upstream's etcd_request_duration_seconds buckets.
var storageDurationBuckets = []float64{0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3,
	4, 5, 6, 8, 10, 15, 20, 30, 45, 60}

// NewInstrumented registers the storage metrics in reg and wraps s.
func NewInstrumented(s Store, reg prometheus.Registerer) (*Instrumented, error) {
	i := &Instrumented{
		Store: s,
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "etcd_request_duration_seconds",
			Help:    "Storage request latency in seconds for each operation and object type.",
			Buckets: storageDurationBuckets,
		}, []string{"operation", "type"}),
		objects: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_storage_objects",
			Help: "Number of stored objects at the time of last check split by kind.",
		}, []string{"resource"}),
		observers: map[opType]prometheus.Observer{},
	}
	for _, c := range []prometheus.Collector{i.duration, i.objects} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register storage metrics: %w", err)
		}
	}
	return i, nil
}

// CountObjects sets apiserver_storage_objects from a full listing of the
// store, in pages. Call it once, before anything writes through i.
func (i *Instrumented) CountObjects(ctx context.Context) error {
	counts := map[string]float64{}
	opts := ListOptions{Limit: 1000}
	for {
		res, err := i.Store.List(ctx, "/", opts)
		if err != nil {
			return fmt.Errorf("count stored objects: %w", err)
		}
		for _, kv := range res.KVs {
			counts[resourceOf(kv.Key)]++
		}
		if !res.More || len(res.KVs) == 0 {
			break
		}
		opts.StartKey = res.KVs[len(res.KVs)-1].Key + "\x00"
	}
	for r, n := range counts {
		i.objects.WithLabelValues(r).Set(n)
	}
	return nil
}

// resourceOf is the resource a key belongs to: its first segment
// ("/pods/ns/name" -> "pods").
func resourceOf(key string) string {
	k := strings.TrimPrefix(key, "/")
	if j := strings.IndexByte(k, '/'); j >= 0 {
		return k[:j]
	}
	return k
}

// since observes the time since start for op on key's resource.
func (i *Instrumented) since(op, key string, start time.Time) {
	k := opType{op, resourceOf(key)}
	i.mu.Lock()
	o, ok := i.observers[k]
	if !ok {
		o = i.duration.WithLabelValues(k.op, k.typ)
		i.observers[k] = o
	}
	i.mu.Unlock()
	o.Observe(time.Since(start).Seconds())
}

func (i *Instrumented) Get(ctx context.Context, key string) (KV, error) {
	defer i.since("get", key, time.Now())
	return i.Store.Get(ctx, key)
}

func (i *Instrumented) List(ctx context.Context, prefix string, opts ListOptions) (ListResult, error) {
	defer i.since("list", prefix, time.Now())
	return i.Store.List(ctx, prefix, opts)
}

func (i *Instrumented) Create(ctx context.Context, key string, value []byte) (int64, error) {
	defer i.since("create", key, time.Now())
	rev, err := i.Store.Create(ctx, key, value)
	if err == nil {
		i.objects.WithLabelValues(resourceOf(key)).Inc()
	}
	return rev, err
}

func (i *Instrumented) Update(ctx context.Context, key string, value []byte, expectedRevision int64) (int64, error) {
	defer i.since("update", key, time.Now())
	return i.Store.Update(ctx, key, value, expectedRevision)
}

func (i *Instrumented) Delete(ctx context.Context, key string, expectedRevision int64) (int64, KV, error) {
	defer i.since("delete", key, time.Now())
	rev, kv, err := i.Store.Delete(ctx, key, expectedRevision)
	if err == nil {
		i.objects.WithLabelValues(resourceOf(key)).Dec()
	}
	return rev, kv, err
}

// Watch times only the set-up; the stream itself lasts as long as the
// watcher wants.
func (i *Instrumented) Watch(ctx context.Context, prefix string, fromRevision int64) (Watcher, error) {
	defer i.since("watch", prefix, time.Now())
	return i.Store.Watch(ctx, prefix, fromRevision)
}
