// Package endpoints maintains the Endpoints and the EndpointSlices of every
// Service with a selector, as upstream's endpoints and endpointslice
// controllers do: one object (or set of slices) per Service, listing the
// matching pods' IPs and resolved target ports, ready ones apart from the
// others, written only when something changed. Services without a
// selector are left to whoever manages their endpoints.
package endpoints

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/nodelet/nodelet/controlplane/controllers/keyqueue"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
)

// Event reasons, as upstream.
const (
	ReasonFailedToCreateEndpoint       = "FailedToCreateEndpoint"
	ReasonFailedToUpdateEndpoint       = "FailedToUpdateEndpoint"
	ReasonFailedToUpdateEndpointSlices = "FailedToUpdateEndpointSlices"
)

// leaderAnnotation marks old-style leader-election Endpoints, which have no
// Service and must not be deleted as leftovers.
const leaderAnnotation = "control-plane.alpha.kubernetes.io/leader"

// errStaleSlices requeues a Service whose slices the cache has not caught
// up with.
var errStaleSlices error = staleSlices{}

// staleSlices is a keyqueue.Retrier: expected, retried quietly.
type staleSlices struct{}

func (staleSlices) Error() string             { return "endpoints: endpointslice cache is stale" }
func (staleSlices) RetryAfter() time.Duration { return 0 }

// Config configures the controller.
type Config struct {
	Client    kubernetes.Interface
	Informers informers.SharedInformerFactory
	Recorder  record.EventRecorder
	Log       *slog.Logger
}

// Controller keeps Endpoints and EndpointSlices in step with Services and
// pods. The work key is the Service's namespace/name.
type Controller struct {
	client    kubernetes.Interface
	recorder  record.EventRecorder
	log       *slog.Logger
	services  corelisters.ServiceLister
	pods      corelisters.PodLister
	endpoints corelisters.EndpointsLister
	slices    discoverylisters.EndpointSliceLister
	nodes     corelisters.NodeLister
	synced    []cache.InformerSynced
	queue     workqueue.TypedRateLimitingInterface[string]
	tracker   *sliceTracker
}

// New registers the informer handlers.
func New(cfg Config) (*Controller, error) {
	if cfg.Client == nil || cfg.Informers == nil || cfg.Recorder == nil {
		return nil, errors.New("endpoints: Client, Informers and Recorder are required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	core := cfg.Informers.Core().V1()
	sliceInf := cfg.Informers.Discovery().V1().EndpointSlices()
	c := &Controller{
		client: cfg.Client, recorder: cfg.Recorder, log: cfg.Log.With("controller", "endpoints"),
		services: core.Services().Lister(), pods: core.Pods().Lister(), endpoints: core.Endpoints().Lister(),
		slices: sliceInf.Lister(), nodes: core.Nodes().Lister(),
		synced: []cache.InformerSynced{core.Services().Informer().HasSynced, core.Pods().Informer().HasSynced,
			core.Endpoints().Informer().HasSynced, sliceInf.Informer().HasSynced, core.Nodes().Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "endpoints"}),
		tracker: newSliceTracker(),
	}
	handlers := []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{
		{core.Services().Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: c.enqueue, UpdateFunc: func(_, n any) { c.enqueue(n) }, DeleteFunc: c.enqueue}},
		{core.Pods().Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: c.podChanged, UpdateFunc: c.podUpdated, DeleteFunc: c.podChanged}},
		{core.Endpoints().Informer(), cache.ResourceEventHandlerFuncs{DeleteFunc: c.enqueue}},
		{sliceInf.Informer(), cache.ResourceEventHandlerFuncs{
			UpdateFunc: func(_, n any) { c.sliceChanged(n, false) }, DeleteFunc: func(o any) { c.sliceChanged(o, true) }}},
		{core.Nodes().Informer(), cache.ResourceEventHandlerFuncs{UpdateFunc: c.nodeUpdated}},
	}
	for _, h := range handlers {
		if _, err := h.inf.AddEventHandler(h.h); err != nil {
			return nil, fmt.Errorf("endpoints: add handler: %w", err)
		}
	}
	return c, nil
}

func (c *Controller) enqueue(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.queue.Add(key)
}

func podOf(obj any) *corev1.Pod {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, _ := obj.(*corev1.Pod)
	return pod
}

// podChanged enqueues every Service whose selector matches the pod.
func (c *Controller) podChanged(obj any) {
	pod := podOf(obj)
	if pod == nil {
		return
	}
	svcs, err := c.services.Services(pod.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, svc := range svcs {
		if svc.Spec.Selector != nil && labels.SelectorFromValidatedSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels)) {
			c.queue.Add(pod.Namespace + "/" + svc.Name)
		}
	}
}

func (c *Controller) podUpdated(oldObj, newObj any) {
	o, n := podOf(oldObj), podOf(newObj)
	if o == nil || n == nil || o.ResourceVersion == n.ResourceVersion {
		return
	}
	// A relabelled pod leaves the old Services and joins the new ones.
	if !maps.Equal(o.Labels, n.Labels) {
		c.podChanged(o)
	}
	c.podChanged(n)
}

// sliceChanged resyncs a Service when one of its managed slices changed
// or went away, so that edits by others are undone.
func (c *Controller) sliceChanged(obj any, deleted bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok || s.Labels[discoveryv1.LabelManagedBy] != ManagedBy || s.Labels[discoveryv1.LabelServiceName] == "" {
		return
	}
	key := s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName]
	if deleted {
		c.tracker.observedDeleted(key, s.Name)
	}
	c.queue.Add(key)
}

// nodeUpdated resyncs all Services when a node's zone changes, since the
// zone is part of its endpoints.
func (c *Controller) nodeUpdated(oldObj, newObj any) {
	o, ok1 := oldObj.(*corev1.Node)
	n, ok2 := newObj.(*corev1.Node)
	if !ok1 || !ok2 || o.Labels[corev1.LabelTopologyZone] == n.Labels[corev1.LabelTopologyZone] {
		return
	}
	svcs, _ := c.services.List(labels.Everything())
	for _, svc := range svcs {
		c.enqueue(svc)
	}
}

func (c *Controller) zoneOf(node string) string {
	n, err := c.nodes.Get(node)
	if err != nil {
		return ""
	}
	return n.Labels[corev1.LabelTopologyZone]
}

// Run syncs with workers goroutines until ctx ends. At start it also
// queues every Endpoints object, so that those of Services deleted while
// the controller was down are removed.
func (c *Controller) Run(ctx context.Context, workers int) error {
	defer c.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("endpoints: wait for cache sync: %w", ctx.Err())
	}
	eps, err := c.endpoints.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("endpoints: list endpoints: %w", err)
	}
	for _, ep := range eps {
		if _, leader := ep.Annotations[leaderAnnotation]; !leader {
			c.enqueue(ep)
		}
	}
	c.log.Info("started")
	keyqueue.Run(ctx, c.queue, workers, c.Reconcile, c.log)
	return nil
}

// Reconcile syncs the Endpoints and EndpointSlices of Service key.
func (c *Controller) Reconcile(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	svc, err := c.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		// Slices go with the Service through their owner reference (the
		// garbage collector); Endpoints carry none, so delete them here.
		c.tracker.forget(key)
		err := c.client.CoreV1().Endpoints(ns).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete endpoints %s: %w", key, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get service %s: %w", key, err)
	}
	if svc.Spec.Selector == nil || svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	pods, err := c.pods.Pods(ns).List(labels.SelectorFromValidatedSet(svc.Spec.Selector))
	if err != nil {
		return fmt.Errorf("list pods for service %s: %w", key, err)
	}
	return errors.Join(c.syncEndpoints(ctx, svc, pods), c.syncSlices(ctx, key, svc, pods))
}

func (c *Controller) syncEndpoints(ctx context.Context, svc *corev1.Service, pods []*corev1.Pod) error {
	cur, err := c.endpoints.Endpoints(svc.Namespace).Get(svc.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("get endpoints %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	if err != nil {
		cur = nil
	}
	want := desiredEndpoints(svc, cur, pods)
	if cur != nil && apiequality.Semantic.DeepEqual(cur.Subsets, want.Subsets) &&
		maps.Equal(cur.Labels, want.Labels) && maps.Equal(cur.Annotations, want.Annotations) {
		return nil
	}
	eps := c.client.CoreV1().Endpoints(svc.Namespace)
	if cur == nil {
		_, err = eps.Create(ctx, want, metav1.CreateOptions{})
	} else {
		_, err = eps.Update(ctx, want, metav1.UpdateOptions{})
	}
	if err == nil || namespaceTerminating(err) {
		return nil
	}
	reason, verb := ReasonFailedToUpdateEndpoint, "update"
	if cur == nil {
		reason, verb = ReasonFailedToCreateEndpoint, "create"
	}
	// Conflicts only mean the cache lags; the retry will fix them quietly.
	if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
		c.recorder.Eventf(svc, corev1.EventTypeWarning, reason, "Failed to %s endpoint for service %s/%s: %v", verb, svc.Namespace, svc.Name, err)
	}
	return fmt.Errorf("%s endpoints %s/%s: %w", verb, svc.Namespace, svc.Name, err)
}

func (c *Controller) syncSlices(ctx context.Context, key string, svc *corev1.Service, pods []*corev1.Pod) error {
	if c.tracker.stale(key, svc.Namespace, c.slices) {
		return errStaleSlices
	}
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: ManagedBy})
	existing, err := c.slices.EndpointSlices(svc.Namespace).List(sel)
	if err != nil {
		return fmt.Errorf("list endpointslices for %s: %w", key, err)
	}
	plan := planSlices(svc, existing, desiredGroups(svc, pods, c.zoneOf))
	if plan.empty() {
		return nil
	}
	if err := c.applySlices(ctx, key, plan); err != nil {
		if !namespaceTerminating(err) && !apierrors.IsConflict(err) {
			c.recorder.Eventf(svc, corev1.EventTypeWarning, ReasonFailedToUpdateEndpointSlices,
				"Error updating Endpoint Slices for Service %s/%s: %v", svc.Namespace, svc.Name, err)
		}
		return err
	}
	return nil
}

// applySlices writes a plan: creates first, then updates, then deletes, so
// that endpoints moving between slices are never missing in between.
func (c *Controller) applySlices(ctx context.Context, key string, plan slicePlan) error {
	if len(plan.create)+len(plan.update)+len(plan.delete) == 0 {
		return nil
	}
	api := c.client.DiscoveryV1()
	for _, s := range plan.create {
		got, err := api.EndpointSlices(s.Namespace).Create(ctx, s, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create endpointslice for %s: %w", key, err)
		}
		c.tracker.expect(key, got.Name, got.ResourceVersion)
	}
	for _, s := range plan.update {
		got, err := api.EndpointSlices(s.Namespace).Update(ctx, s, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("update endpointslice %s/%s: %w", s.Namespace, s.Name, err)
		}
		c.tracker.expect(key, got.Name, got.ResourceVersion)
	}
	for _, s := range plan.delete {
		err := api.EndpointSlices(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete endpointslice %s/%s: %w", s.Namespace, s.Name, err)
		}
		c.tracker.expect(key, s.Name, "")
	}
	return nil
}

func namespaceTerminating(err error) bool {
	return apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}
