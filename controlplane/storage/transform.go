package storage

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/storage/value"
)

// Transforming encrypts values at rest, as kube-apiserver does with
// --encryption-provider-config: the values of the resources a
// transformer is configured for (upstream's value.Transformer, from
// upstream's encryption configuration) are transformed on the way to the
// store and back on the way out (reads, lists and watch events), with the
// key as authenticated data. Callers see plaintext; a value read through
// a key that is not the preferred one is marked Stale.
//
// Keys are the API server's: /RESOURCE[.GROUP]/..., so the first segment
// names the group-resource.
type Transforming struct {
	Store
	transformers map[schema.GroupResource]value.Transformer
}

// NewTransforming wraps s. transformers is by group-resource, with
// upstream's wildcards: {Group: G, Resource: "*"} for a group and
// {Group: "*", Resource: "*"} for everything.
func NewTransforming(s Store, transformers map[schema.GroupResource]value.Transformer) *Transforming {
	return &Transforming{Store: s, transformers: transformers}
}

// mayTransform reports whether any key under prefix may have a
// transformer: watches of other resources need no decrypting goroutine.
func (t *Transforming) mayTransform(prefix string) bool {
	if len(t.transformers) == 0 {
		return false
	}
	if seg, _, _ := strings.Cut(strings.TrimPrefix(prefix, "/"), "/"); seg == "" {
		return true // the whole store
	}
	return t.transformerFor(prefix) != nil
}

// transformerFor returns the transformer for key, or nil.
func (t *Transforming) transformerFor(key string) value.Transformer {
	seg, _, _ := strings.Cut(strings.TrimPrefix(key, "/"), "/")
	resource, group, _ := strings.Cut(seg, ".")
	for _, gr := range []schema.GroupResource{{Group: group, Resource: resource}, {Group: group, Resource: "*"}, {Group: "*", Resource: "*"}} {
		if tr, ok := t.transformers[gr]; ok {
			return tr
		}
	}
	return nil
}

func (t *Transforming) seal(ctx context.Context, key string, v []byte) ([]byte, error) {
	tr := t.transformerFor(key)
	if tr == nil {
		return v, nil
	}
	out, err := tr.TransformToStorage(ctx, v, value.DefaultContext(key))
	if err != nil {
		return nil, fmt.Errorf("encrypt %q: %w", key, err)
	}
	return out, nil
}

func (t *Transforming) open(ctx context.Context, kv *KV) error {
	tr := t.transformerFor(kv.Key)
	if tr == nil || kv.Value == nil {
		return nil
	}
	out, stale, err := tr.TransformFromStorage(ctx, kv.Value, value.DefaultContext(kv.Key))
	if err != nil {
		return fmt.Errorf("decrypt %q: %w", kv.Key, err)
	}
	kv.Value, kv.Stale = out, stale
	return nil
}

func (t *Transforming) Get(ctx context.Context, key string) (KV, error) {
	kv, err := t.Store.Get(ctx, key)
	if err != nil {
		return kv, err
	}
	return kv, t.open(ctx, &kv)
}

func (t *Transforming) List(ctx context.Context, prefix string, opts ListOptions) (ListResult, error) {
	res, err := t.Store.List(ctx, prefix, opts)
	if err != nil {
		return res, err
	}
	for i := range res.KVs {
		if err := t.open(ctx, &res.KVs[i]); err != nil {
			return ListResult{}, err
		}
	}
	return res, nil
}

func (t *Transforming) Create(ctx context.Context, key string, v []byte) (int64, error) {
	sealed, err := t.seal(ctx, key, v)
	if err != nil {
		return 0, err
	}
	return t.Store.Create(ctx, key, sealed)
}

func (t *Transforming) Update(ctx context.Context, key string, v []byte, expectedRevision int64) (int64, error) {
	sealed, err := t.seal(ctx, key, v)
	if err != nil {
		return 0, err
	}
	return t.Store.Update(ctx, key, sealed, expectedRevision)
}

func (t *Transforming) Delete(ctx context.Context, key string, expectedRevision int64) (int64, KV, error) {
	rev, kv, err := t.Store.Delete(ctx, key, expectedRevision)
	if err != nil {
		return rev, kv, err
	}
	return rev, kv, t.open(ctx, &kv)
}

// Watch decrypts events under prefix on their way to the watcher.
func (t *Transforming) Watch(ctx context.Context, prefix string, fromRevision int64) (Watcher, error) {
	w, err := t.Store.Watch(ctx, prefix, fromRevision)
	if err != nil || !t.mayTransform(prefix) {
		return w, err
	}
	out := &openingWatcher{Watcher: w, events: make(chan Event, 64)}
	go out.run(ctx, t)
	return out, nil
}

// Check passes the health check to the store below.
func (t *Transforming) Check(ctx context.Context) error { return CheckHealth(ctx, t.Store) }

// openingWatcher is a Watcher whose events are decrypted.
type openingWatcher struct {
	Watcher
	events chan Event
	err    error
}

func (w *openingWatcher) run(ctx context.Context, t *Transforming) {
	defer close(w.events)
	for ev := range w.Watcher.Events() {
		if err := t.open(ctx, &ev.KV); err != nil {
			w.err = err
			w.Watcher.Stop()
			return
		}
		if ev.PrevValue != nil {
			prev := KV{Key: ev.KV.Key, Value: ev.PrevValue}
			if err := t.open(ctx, &prev); err != nil {
				w.err = err
				w.Watcher.Stop()
				return
			}
			ev.PrevValue = prev.Value
		}
		select {
		case w.events <- ev:
		case <-ctx.Done():
			w.Watcher.Stop()
			return
		}
	}
}

func (w *openingWatcher) Events() <-chan Event { return w.events }

// Err is the watch's error: a value that did not decrypt, or the store's.
func (w *openingWatcher) Err() error {
	if w.err != nil {
		return w.err
	}
	return w.Watcher.Err()
}
