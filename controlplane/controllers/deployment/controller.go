// Package deployment is the Deployment controller: it turns a Deployment
// into ReplicaSets named "<deployment>-<pod-template-hash>", rolls pods from
// the old ReplicaSets to the new one (RollingUpdate within maxSurge and
// maxUnavailable, or Recreate), scales proportionally, keeps revision
// annotations and history, and reports status and the Progressing/Available
// conditions that `kubectl rollout status` reads. Semantics follow
// upstream's pkg/controller/deployment.
package deployment

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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

var controllerKind = appsv1.SchemeGroupVersion.WithKind("Deployment")

// Config configures the controller. Client, Informers and Recorder are
// required.
type Config struct {
	Client    kubernetes.Interface
	Informers informers.SharedInformerFactory
	Recorder  record.EventRecorder
	Log       *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Controller is the Deployment controller.
type Controller struct {
	client   kubernetes.Interface
	recorder record.EventRecorder
	log      *slog.Logger
	now      func() time.Time

	dLister   appslisters.DeploymentLister
	rsLister  appslisters.ReplicaSetLister
	podLister corelisters.PodLister
	synced    []cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[string]
}

// New builds the controller and registers its informer handlers; start the
// factory after New.
func New(cfg Config) (*Controller, error) {
	if cfg.Client == nil || cfg.Informers == nil || cfg.Recorder == nil {
		return nil, errors.New("deployment: Client, Informers and Recorder are required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	dInf := cfg.Informers.Apps().V1().Deployments()
	rsInf := cfg.Informers.Apps().V1().ReplicaSets()
	podInf := cfg.Informers.Core().V1().Pods()
	c := &Controller{
		client: cfg.Client, recorder: cfg.Recorder, now: cfg.Now,
		log:       cfg.Log.With("controller", "deployment"),
		dLister:   dInf.Lister(),
		rsLister:  rsInf.Lister(),
		podLister: podInf.Lister(),
		synced:    []cache.InformerSynced{dInf.Informer().HasSynced, rsInf.Informer().HasSynced, podInf.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "deployment"}),
	}
	handlers := []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{
		{dInf.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    c.enqueue,
			UpdateFunc: func(_, cur any) { c.enqueue(cur) },
			DeleteFunc: c.enqueue,
		}},
		{rsInf.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    c.addReplicaSet,
			UpdateFunc: c.updateReplicaSet,
			DeleteFunc: c.deleteReplicaSet,
		}},
		{podInf.Informer(), cache.ResourceEventHandlerFuncs{
			UpdateFunc: func(_, cur any) {
				if ph := cur.(*corev1.Pod).Status.Phase; ph == corev1.PodSucceeded || ph == corev1.PodFailed {
					c.podChanged(cur)
				}
			},
			DeleteFunc: c.podChanged,
		}},
	}
	for _, h := range handlers {
		if _, err := h.inf.AddEventHandler(h.h); err != nil {
			return nil, fmt.Errorf("deployment: add handler: %w", err)
		}
	}
	return c, nil
}

// Run waits for the caches, then runs workers until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) error {
	defer c.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("deployment: caches did not sync: %w", ctx.Err())
	}
	c.log.Info("started", "workers", workers)
	keyqueue.Run(ctx, c.queue, workers, c.Reconcile, c.log)
	return nil
}

func (c *Controller) enqueue(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	c.queue.Add(key)
}

// resolveControllerRef returns the Deployment ref points to, or nil.
func (c *Controller) resolveControllerRef(ns string, ref *metav1.OwnerReference) *appsv1.Deployment {
	if ref == nil || ref.Kind != controllerKind.Kind || ref.APIVersion != appsv1.SchemeGroupVersion.String() {
		return nil
	}
	d, err := c.dLister.Deployments(ns).Get(ref.Name)
	if err != nil || d.UID != ref.UID {
		return nil
	}
	return d
}

// deploymentsForReplicaSet returns the Deployments whose selector matches an
// orphan ReplicaSet (candidates to adopt it).
func (c *Controller) deploymentsForReplicaSet(rs *appsv1.ReplicaSet) []*appsv1.Deployment {
	if len(rs.Labels) == 0 {
		return nil
	}
	all, err := c.dLister.Deployments(rs.Namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	var out []*appsv1.Deployment
	for _, d := range all {
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(rs.Labels)) {
			continue
		}
		out = append(out, d)
	}
	return out
}

func (c *Controller) addReplicaSet(obj any) {
	rs := obj.(*appsv1.ReplicaSet)
	if rs.DeletionTimestamp != nil {
		c.deleteReplicaSet(rs)
		return
	}
	if ref := metav1.GetControllerOf(rs); ref != nil {
		if d := c.resolveControllerRef(rs.Namespace, ref); d != nil {
			c.enqueue(d)
		}
		return
	}
	for _, d := range c.deploymentsForReplicaSet(rs) {
		c.enqueue(d)
	}
}

func (c *Controller) updateReplicaSet(old, cur any) {
	ors, crs := old.(*appsv1.ReplicaSet), cur.(*appsv1.ReplicaSet)
	if ors.ResourceVersion == crs.ResourceVersion {
		return
	}
	curRef, oldRef := metav1.GetControllerOf(crs), metav1.GetControllerOf(ors)
	refChanged := (curRef == nil) != (oldRef == nil) || (curRef != nil && curRef.UID != oldRef.UID)
	if refChanged && oldRef != nil {
		if d := c.resolveControllerRef(ors.Namespace, oldRef); d != nil {
			c.enqueue(d)
		}
	}
	if curRef != nil {
		if d := c.resolveControllerRef(crs.Namespace, curRef); d != nil {
			c.enqueue(d)
		}
		return
	}
	if refChanged || !labels.Equals(crs.Labels, ors.Labels) {
		for _, d := range c.deploymentsForReplicaSet(crs) {
			c.enqueue(d)
		}
	}
}

func (c *Controller) deleteReplicaSet(obj any) {
	rs, ok := obj.(*appsv1.ReplicaSet)
	if !ok {
		tomb, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			return
		}
		if rs, ok = tomb.Obj.(*appsv1.ReplicaSet); !ok {
			return
		}
	}
	if d := c.resolveControllerRef(rs.Namespace, metav1.GetControllerOf(rs)); d != nil {
		c.enqueue(d)
	}
}

// podChanged wakes a Recreate Deployment when one of its pods finishes or
// goes: it waits for the old pods to stop before scaling up, and pod
// terminations do not otherwise touch its ReplicaSets' status.
func (c *Controller) podChanged(obj any) {
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
	ref := metav1.GetControllerOf(p)
	if ref == nil || ref.Kind != "ReplicaSet" {
		return
	}
	rs, err := c.rsLister.ReplicaSets(p.Namespace).Get(ref.Name)
	if err != nil || rs.UID != ref.UID {
		return
	}
	d := c.resolveControllerRef(rs.Namespace, metav1.GetControllerOf(rs))
	if d != nil && d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		c.enqueue(d)
	}
}
