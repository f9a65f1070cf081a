package garbagecollector

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
)

// DefaultIgnoredResources are not watched, as upstream: events are many,
// short-lived and never owners.
func DefaultIgnoredResources() []schema.GroupResource {
	return []schema.GroupResource{{Group: "", Resource: "events"}, {Group: "events.k8s.io", Resource: "events"}}
}

// collectable picks, from discovery, the resources the collector watches:
// top-level resources with list, watch and delete, minus ignored ones.
// The result maps each resource to its kind.
func collectable(lists []*metav1.APIResourceList, ignored []schema.GroupResource) map[schema.GroupVersionResource]string {
	skip := make(map[schema.GroupResource]bool, len(ignored))
	for _, gr := range ignored {
		skip[gr] = true
	}
	out := map[schema.GroupVersionResource]string{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || skip[gv.WithResource(r.Name).GroupResource()] {
				continue
			}
			if !hasVerbs(r.Verbs, "list", "watch", "delete") {
				continue
			}
			out[gv.WithResource(r.Name)] = r.Kind
		}
	}
	return out
}

func hasVerbs(have metav1.Verbs, want ...string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			if h == w {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// monitor is one metadata informer feeding the graph.
type monitor struct {
	gvr      schema.GroupVersionResource
	kind     string
	informer cache.SharedIndexInformer
	cancel   context.CancelFunc
}

// monitorSet holds the running monitors by resource.
type monitorSet struct {
	mu sync.Mutex
	m  map[schema.GroupVersionResource]*monitor
}

// discover lists the resources to watch. partial is true when some API
// groups failed discovery: the caller then keeps monitors it has for
// resources missing from the answer.
func (c *Controller) discover() (res map[schema.GroupVersionResource]string, partial bool, err error) {
	lists, err := c.cfg.Discovery.ServerPreferredResources()
	if err != nil {
		var gerr *discovery.ErrGroupDiscoveryFailed
		if !errors.As(err, &gerr) || len(lists) == 0 {
			return nil, false, fmt.Errorf("discover resources: %w", err)
		}
		c.log.Warn("partial discovery", "err", err)
		partial = true
	}
	return collectable(lists, c.cfg.IgnoredResources), partial, nil
}

// syncMonitors starts informers for resources not yet watched and, unless
// partial, stops those for resources the server no longer serves. It
// returns the monitors it started.
func (c *Controller) syncMonitors(ctx context.Context, want map[schema.GroupVersionResource]string, partial bool) []*monitor {
	c.monitors.mu.Lock()
	defer c.monitors.mu.Unlock()
	if !partial {
		for gvr, m := range c.monitors.m {
			if _, ok := want[gvr]; !ok {
				m.cancel()
				delete(c.monitors.m, gvr)
				c.log.Info("stopped monitor", "resource", gvr.String())
			}
		}
	}
	var started []*monitor
	for gvr, kind := range want {
		if _, ok := c.monitors.m[gvr]; ok {
			continue
		}
		m := c.newMonitor(gvr, kind)
		mctx, cancel := context.WithCancel(ctx)
		m.cancel = cancel
		c.monitors.m[gvr] = m
		go m.informer.Run(mctx.Done())
		started = append(started, m)
	}
	return started
}

func (c *Controller) newMonitor(gvr schema.GroupVersionResource, kind string) *monitor {
	inf := metadatainformer.NewFilteredMetadataInformer(c.cfg.Metadata, gvr, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	m := &monitor{gvr: gvr, kind: kind, informer: inf}
	apiVersion := gvr.GroupVersion().String()
	observe := func(obj any) {
		acc, err := meta.Accessor(obj)
		if err != nil {
			return
		}
		id := objectID{APIVersion: apiVersion, Kind: kind, Namespace: acc.GetNamespace(), Name: acc.GetName(), UID: acc.GetUID()}
		c.apply(c.graph.observe(id, acc))
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			acc, err := meta.Accessor(obj)
			if err != nil {
				return
			}
			c.apply(c.graph.forget(acc.GetUID()))
		},
	})
	return m
}

// synced reports whether every monitor in ms has listed its resource.
func synced(ms []*monitor) cache.InformerSynced {
	return func() bool {
		for _, m := range ms {
			if !m.informer.HasSynced() {
				return false
			}
		}
		return true
	}
}

func (c *Controller) allMonitors() []*monitor {
	c.monitors.mu.Lock()
	defer c.monitors.mu.Unlock()
	out := make([]*monitor, 0, len(c.monitors.m))
	for _, m := range c.monitors.m {
		out = append(out, m)
	}
	return out
}

func (c *Controller) stopMonitors() {
	c.monitors.mu.Lock()
	defer c.monitors.mu.Unlock()
	for gvr, m := range c.monitors.m {
		m.cancel()
		delete(c.monitors.m, gvr)
	}
}
