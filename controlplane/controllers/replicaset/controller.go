// Package replicaset is the ReplicaSet controller: it creates and deletes
// pods so that each ReplicaSet has spec.replicas active pods, adopts
// matching orphans, releases pods that stopped matching, and reports counts
// in the status. Semantics follow upstream's pkg/controller/replicaset.
package replicaset

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"time"

	"github.com/nodelet/nodelet/controlplane/controllers/keyqueue"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
)

// BurstReplicas is the default cap on pods created or deleted in one sync.
const BurstReplicas = 500

var controllerKind = appsv1.SchemeGroupVersion.WithKind("ReplicaSet")

// Config configures the controller. Client, Informers and Recorder are
// required.
type Config struct {
	Client    kubernetes.Interface
	Informers informers.SharedInformerFactory
	Recorder  record.EventRecorder
	Log       *slog.Logger
	// BurstReplicas caps creations or deletions per sync (default 500).
	BurstReplicas int
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Controller is the ReplicaSet controller.
type Controller struct {
	client   kubernetes.Interface
	recorder record.EventRecorder
	log      *slog.Logger
	burst    int
	now      func() time.Time

	rsLister  appslisters.ReplicaSetLister
	podLister corelisters.PodLister
	synced    []cache.InformerSynced

	exp   *expectations
	queue workqueue.TypedRateLimitingInterface[string]
}

// New builds the controller and registers its informer handlers; start the
// factory after New.
func New(cfg Config) (*Controller, error) {
	if cfg.Client == nil || cfg.Informers == nil || cfg.Recorder == nil {
		return nil, errors.New("replicaset: Client, Informers and Recorder are required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.BurstReplicas <= 0 {
		cfg.BurstReplicas = BurstReplicas
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	rsInf := cfg.Informers.Apps().V1().ReplicaSets()
	podInf := cfg.Informers.Core().V1().Pods()
	c := &Controller{
		client: cfg.Client, recorder: cfg.Recorder, burst: cfg.BurstReplicas, now: cfg.Now,
		log:       cfg.Log.With("controller", "replicaset"),
		rsLister:  rsInf.Lister(),
		podLister: podInf.Lister(),
		synced:    []cache.InformerSynced{rsInf.Informer().HasSynced, podInf.Informer().HasSynced},
		exp:       newExpectations(cfg.Now),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "replicaset"}),
	}
	if _, err := rsInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, cur any) { c.enqueue(cur) },
		DeleteFunc: c.deleteRS,
	}); err != nil {
		return nil, fmt.Errorf("replicaset: add handler: %w", err)
	}
	if _, err := podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addPod,
		UpdateFunc: c.updatePod,
		DeleteFunc: c.deletePod,
	}); err != nil {
		return nil, fmt.Errorf("replicaset: add handler: %w", err)
	}
	return c, nil
}

// Run waits for the caches, then runs workers until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) error {
	defer c.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("replicaset: caches did not sync: %w", ctx.Err())
	}
	c.log.Info("started", "workers", workers)
	keyqueue.Run(ctx, c.queue, workers, c.Reconcile, c.log)
	return nil
}

func (c *Controller) enqueue(obj any) {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	c.queue.Add(key)
}

func (c *Controller) enqueueAfter(rs *appsv1.ReplicaSet, d time.Duration) {
	if key, err := cache.MetaNamespaceKeyFunc(rs); err == nil {
		c.queue.AddAfter(key, d)
	}
}

func (c *Controller) deleteRS(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	c.exp.Delete(key)
	c.queue.Add(key)
}

// resolveControllerRef returns the ReplicaSet ref names in ns if it is the
// one the ref points to (same UID), or nil.
func (c *Controller) resolveControllerRef(ns string, ref *metav1.OwnerReference) *appsv1.ReplicaSet {
	if ref == nil || ref.Kind != controllerKind.Kind || ref.APIVersion != appsv1.SchemeGroupVersion.String() {
		return nil
	}
	rs, err := c.rsLister.ReplicaSets(ns).Get(ref.Name)
	if err != nil || rs.UID != ref.UID {
		return nil
	}
	return rs
}

// replicaSetsForPod returns the ReplicaSets whose selector matches an
// orphan pod (candidates to adopt it).
func (c *Controller) replicaSetsForPod(p *corev1.Pod) []*appsv1.ReplicaSet {
	if len(p.Labels) == 0 {
		return nil
	}
	all, err := c.rsLister.ReplicaSets(p.Namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	var out []*appsv1.ReplicaSet
	for _, rs := range all {
		sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		out = append(out, rs)
	}
	return out
}

func (c *Controller) addPod(obj any) {
	p := obj.(*corev1.Pod)
	if p.DeletionTimestamp != nil {
		// After a controller restart a terminating pod shows up as an add.
		c.deletePod(p)
		return
	}
	if ref := metav1.GetControllerOf(p); ref != nil {
		rs := c.resolveControllerRef(p.Namespace, ref)
		if rs == nil {
			return
		}
		key, _ := cache.MetaNamespaceKeyFunc(rs)
		c.exp.CreationObserved(key)
		c.queue.Add(key)
		return
	}
	for _, rs := range c.replicaSetsForPod(p) {
		c.enqueue(rs)
	}
}

func (c *Controller) updatePod(old, cur any) {
	op, cp := old.(*corev1.Pod), cur.(*corev1.Pod)
	if op.ResourceVersion == cp.ResourceVersion {
		return // periodic resync
	}
	labelsChanged := !reflect.DeepEqual(op.Labels, cp.Labels)
	if cp.DeletionTimestamp != nil {
		// A graceful delete is observed as soon as the timestamp is set, so
		// the ReplicaSet replaces the pod without waiting for the kubelet.
		c.deletePod(cp)
		if labelsChanged {
			c.deletePod(op)
		}
		return
	}
	curRef, oldRef := metav1.GetControllerOf(cp), metav1.GetControllerOf(op)
	refChanged := !reflect.DeepEqual(curRef, oldRef)
	if refChanged && oldRef != nil {
		if rs := c.resolveControllerRef(op.Namespace, oldRef); rs != nil {
			c.enqueue(rs)
		}
	}
	if curRef != nil {
		rs := c.resolveControllerRef(cp.Namespace, curRef)
		if rs == nil {
			return
		}
		c.enqueue(rs)
		// Availability after minReadySeconds produces no pod event: look again then.
		if !IsPodReady(op) && IsPodReady(cp) && rs.Spec.MinReadySeconds > 0 {
			c.enqueueAfter(rs, time.Duration(rs.Spec.MinReadySeconds)*time.Second+time.Second)
		}
		return
	}
	if labelsChanged || refChanged {
		for _, rs := range c.replicaSetsForPod(cp) {
			c.enqueue(rs)
		}
	}
}

func (c *Controller) deletePod(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		tomb, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			return
		}
		if p, ok = tomb.Obj.(*corev1.Pod); !ok {
			return
		}
	}
	rs := c.resolveControllerRef(p.Namespace, metav1.GetControllerOf(p))
	if rs == nil {
		return
	}
	key, _ := cache.MetaNamespaceKeyFunc(rs)
	c.exp.DeletionObserved(key, podKey(p))
	c.queue.Add(key)
}
