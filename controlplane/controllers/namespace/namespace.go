// Package namespace empties namespaces that are being deleted and then
// finalizes them: it deletes every namespaced object in a Terminating
// namespace, waits until none is left, and removes the "kubernetes"
// finalizer so the API server deletes the namespace.
package namespace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nodelet/nodelet/controlplane/controllers/keyqueue"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
)

// Config configures the namespace controller.
type Config struct {
	Client    kubernetes.Interface
	Metadata  metadata.Interface
	Discovery discovery.DiscoveryInterface
	Informers informers.SharedInformerFactory
	Log       *slog.Logger
	// Delay before a namespace marked for deletion is first processed.
	// Upstream waits 5s for HA API servers and etcd members to catch up;
	// with one store behind the API there is nothing to wait for, so the
	// default is none.
	Delay time.Duration
}

// Controller is the namespace controller.
type Controller struct {
	cfg    Config
	log    *slog.Logger
	lister corelisters.NamespaceLister
	synced cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[string]
}

// New builds the controller and registers its namespace informer handlers;
// call it before the informer factory is started.
func New(cfg Config) (*Controller, error) {
	if cfg.Client == nil || cfg.Metadata == nil || cfg.Discovery == nil || cfg.Informers == nil {
		return nil, errors.New("namespace: Client, Metadata, Discovery and Informers are required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	inf := cfg.Informers.Core().V1().Namespaces()
	c := &Controller{
		cfg:    cfg,
		log:    cfg.Log.With("controller", "namespace"),
		lister: inf.Lister(),
		synced: inf.Informer().HasSynced,
		// Upstream's limiter: content that stays (pods in their grace
		// period, finalizers) is polled from 5ms up to 60s.
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, 60*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "namespace"}),
	}
	_, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
	})
	if err != nil {
		return nil, fmt.Errorf("namespace: add handler: %w", err)
	}
	return c, nil
}

func (c *Controller) enqueue(obj any) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok || ns.DeletionTimestamp == nil {
		return
	}
	c.queue.AddAfter(ns.Name, c.cfg.Delay)
}

// Run waits for the namespace cache, then runs workers until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) error {
	defer c.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return nil // ctx ended
	}
	c.log.Info("started", "workers", workers)
	keyqueue.Run(ctx, c.queue, workers, c.Reconcile, c.log)
	return nil
}

// Reconcile handles one namespace: if it is being deleted and still holds
// the "kubernetes" finalizer, delete its content and, once it is empty,
// finalize it. An error asks for a retry; a *contentRemainingError says
// when one is worth it.
func (c *Controller) Reconcile(ctx context.Context, name string) error {
	ns, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get namespace %s: %w", name, err)
	}
	if ns.DeletionTimestamp == nil || !hasKubernetesFinalizer(ns) {
		return nil
	}
	// Read it live: the cache may hold a namespace already finalized.
	ns, err = c.cfg.Client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get namespace %s: %w", name, err)
	}
	if ns.DeletionTimestamp == nil || !hasKubernetesFinalizer(ns) {
		return nil
	}
	res := c.deleteContent(ctx, name)
	if err := c.updateConditions(ctx, ns, res.conditions()); err != nil {
		return err
	}
	if err := res.err(); err != nil {
		return err
	}
	return c.finalize(ctx, name)
}

// updateConditions writes conds onto the namespace status if they change it.
func (c *Controller) updateConditions(ctx context.Context, ns *corev1.Namespace, conds []corev1.NamespaceCondition) error {
	ns = ns.DeepCopy()
	if !mergeConditions(&ns.Status, conds, metav1.Now()) {
		return nil
	}
	_, err := c.cfg.Client.CoreV1().Namespaces().UpdateStatus(ctx, ns, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or conditions are rewritten on the next pass
	}
	if err != nil {
		return fmt.Errorf("update status of namespace %s: %w", ns.Name, err)
	}
	return nil
}

// finalize removes the "kubernetes" finalizer through the finalize
// subresource; the API server deletes the namespace when none is left.
func (c *Controller) finalize(ctx context.Context, name string) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ns, err := c.cfg.Client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !hasKubernetesFinalizer(ns) {
			return nil
		}
		ns = ns.DeepCopy()
		ns.Spec.Finalizers = withoutKubernetesFinalizer(ns.Spec.Finalizers)
		_, err = c.cfg.Client.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("finalize namespace %s: %w", name, err)
	}
	c.log.Info("namespace emptied and finalized", "namespace", name)
	return nil
}

func hasKubernetesFinalizer(ns *corev1.Namespace) bool {
	for _, f := range ns.Spec.Finalizers {
		if f == corev1.FinalizerKubernetes {
			return true
		}
	}
	return false
}

func withoutKubernetesFinalizer(fins []corev1.FinalizerName) []corev1.FinalizerName {
	out := []corev1.FinalizerName{}
	for _, f := range fins {
		if f != corev1.FinalizerKubernetes {
			out = append(out, f)
		}
	}
	return out
}
