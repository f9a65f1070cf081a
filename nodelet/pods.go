package nodelet

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/nodelet/nodelet/podworkers"
	"github.com/nodelet/nodelet/runtime/containerd"
)

const uidIndex = "uid"

// podInformer makes the informer of the node's pods, indexed by UID.
func (a *Agent) podInformer(w *wired) error {
	sel := fields.OneTermEqualSelector("spec.nodeName", a.cfg.NodeName).String()
	w.factory = informers.NewSharedInformerFactoryWithOptions(a.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = sel }))
	w.pods = w.factory.Core().V1().Pods().Informer()
	err := w.pods.AddIndexers(cache.Indexers{uidIndex: func(obj any) ([]string, error) {
		if p, ok := obj.(*corev1.Pod); ok {
			return []string{string(p.UID)}, nil
		}
		return nil, nil
	}})
	if err != nil {
		return fmt.Errorf("nodelet: pod informer index: %w", err)
	}
	return nil
}

// feedWorkers hands the pod informer's events to admission and the pod
// workers (made after the informer, which the status manager reads).
func (a *Agent) feedWorkers(w *wired) error {
	sync := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok {
			a.metrics.PodStart().ObservedPodOnWatch(p)
			a.syncPod(w, p)
		}
	}
	_, err := w.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    sync,
		UpdateFunc: func(_, obj any) { sync(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				a.metrics.PodStart().Forget(p.UID)
				w.admitter.Forget(p.UID)
				w.workers.Update(podworkers.UpdateOptions{Pod: p, Kind: podworkers.Remove})
			}
		},
	})
	if err != nil {
		return fmt.Errorf("nodelet: pod informer handler: %w", err)
	}
	return nil
}

// syncPod hands a pod of the API to its worker, admitting it first when
// it is new to the node. Callers are the informer's handler and
// housekeeping.
func (a *Agent) syncPod(w *wired, p *corev1.Pod) {
	if w.admitter.Admitted(p) {
		w.workers.Update(podworkers.UpdateOptions{Pod: p, Kind: podworkers.Sync})
	}
}

// cachedPod is the informer's copy of a pod (nil before the informer runs
// or when it does not have the pod). Callers must not modify it.
func cachedPod(w *wired, ns, name string) *corev1.Pod {
	obj, ok, err := w.pods.GetIndexer().GetByKey(ns + "/" + name)
	if err != nil || !ok {
		return nil
	}
	p, _ := obj.(*corev1.Pod)
	return p
}

// podByUID looks a pod up in the informer's cache.
func podByUID(w *wired, uid types.UID) *corev1.Pod {
	objs, err := w.pods.GetIndexer().ByIndex(uidIndex, string(uid))
	if err != nil || len(objs) == 0 {
		return nil
	}
	p, _ := objs[0].(*corev1.Pod)
	return p
}

// forwardEvents turns containerd's task exits into PLEG relist hints,
// subscribing again (after a pause) whenever the stream ends.
func (a *Agent) forwardEvents(ctx context.Context, rt *containerd.Runtime, hints chan<- struct{}) {
	for ctx.Err() == nil {
		for range rt.Events(ctx) {
			select {
			case hints <- struct{}{}:
			default:
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// podEvents syncs the pod of every lifecycle event and of every probe
// result that changed, now rather than at the next resync. It reads the
// prober's updates until Stop closes them.
func (a *Agent) podEvents(ctx context.Context, w *wired) {
	events, probes := w.pleg.Watch(), w.probes.Updates()
	for {
		var uid types.UID
		select {
		case <-ctx.Done():
			return
		case ev := <-events:
			uid = ev.PodUID
		case u, ok := <-probes:
			if !ok {
				return
			}
			uid = u
		}
		if p := podByUID(w, uid); p != nil {
			w.workers.Update(podworkers.UpdateOptions{Pod: p, Kind: podworkers.Sync})
		}
	}
}

// housekeeping periodically syncs every pod of the API and removes pods
// the runtime, cgroups or volumes hold that the API no longer has; every
// containerGCTicks ticks it removes dead containers (containergc.go),
// every imageGCTicks unused images (imagegc.go).
func (a *Agent) housekeeping(ctx context.Context, w *wired) {
	t := time.NewTicker(housekeepingInterval)
	defer t.Stop()
	cgc := a.containerGC(w)
	igc := a.imageGC(ctx, w)
	for tick := 1; ; tick++ {
		for _, obj := range w.pods.GetStore().List() {
			if p, ok := obj.(*corev1.Pod); ok {
				a.syncPod(w, p)
			}
		}
		for _, p := range w.orphans.Pods() {
			a.log.Info("removing orphaned pod", "pod", p.Namespace+"/"+p.Name, "uid", p.UID)
			w.workers.Update(podworkers.UpdateOptions{Pod: p, Kind: podworkers.Remove})
		}
		if err := a.reconcileNetwork(ctx, w); err != nil && ctx.Err() == nil {
			a.log.Warn("reconcile pod networks", "err", err)
		}
		w.orphans.RemoveLogs()
		if tick%containerGCTicks == 0 {
			if err := cgc.Collect(ctx); err != nil && ctx.Err() == nil {
				a.log.Warn("container garbage collection", "err", err)
			}
		}
		if tick%imageGCTicks == 1 { // at start too: the first detection
			if err := igc.Collect(ctx); err != nil && ctx.Err() == nil {
				a.log.Warn("image garbage collection", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// reconcileNetwork releases the networks (netns, CNI state, IPs) of
// sandboxes containerd no longer has: leaks of a crash, a reboot or a
// sandbox removed behind the nodelet's back. The live set is read fresh
// from containerd, never from a cache that may not have listed yet.
func (a *Agent) reconcileNetwork(ctx context.Context, w *wired) error {
	pods, err := w.rt.PodStatuses(ctx)
	if err != nil {
		return err
	}
	live := map[string]bool{}
	for _, p := range pods {
		for _, sb := range p.Sandboxes {
			if sb.NetNSPath != "" {
				live[filepath.Base(sb.NetNSPath)] = true
			}
		}
	}
	return w.net.Reconcile(ctx, live)
}
