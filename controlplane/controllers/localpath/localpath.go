package localpath

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	volumehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/nodelet/nodelet/controlplane/controllers/keyqueue"
	nodelocalpath "github.com/nodelet/nodelet/localpath"
)

// Config configures the provisioner.
type Config struct {
	Client    kubernetes.Interface
	Informers informers.SharedInformerFactory
	Recorder  record.EventRecorder
	Log       *slog.Logger
}

// Controller provisions and reclaims local-path volumes.
type Controller struct {
	cfg     Config
	log     *slog.Logger
	claims  corelisters.PersistentVolumeClaimLister
	volumes corelisters.PersistentVolumeLister
	classes storagelisters.StorageClassLister
	nodes   corelisters.NodeLister
	synced  []cache.InformerSynced
	queue   workqueue.TypedRateLimitingInterface[string]
}

// Keys of the queue: "claim/NS/NAME" and "volume/NAME".
const (
	claimKey  = "claim/"
	volumeKey = "volume/"
)

// New registers the provisioner on the shared informers; call it before
// the factory starts.
func New(cfg Config) (*Controller, error) {
	if cfg.Client == nil || cfg.Informers == nil || cfg.Recorder == nil {
		return nil, errors.New("localpath: Client, Informers and Recorder are required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	core, storage := cfg.Informers.Core().V1(), cfg.Informers.Storage().V1()
	c := &Controller{cfg: cfg, log: cfg.Log.With("controller", "local-path-provisioner"),
		claims: core.PersistentVolumeClaims().Lister(), volumes: core.PersistentVolumes().Lister(),
		classes: storage.StorageClasses().Lister(), nodes: core.Nodes().Lister(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "local-path"})}
	enqueue := func(prefix string) cache.ResourceEventHandlerFuncs {
		add := func(obj any) {
			if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
				c.queue.Add(prefix + key)
			}
		}
		return cache.ResourceEventHandlerFuncs{AddFunc: add, UpdateFunc: func(_, obj any) { add(obj) }}
	}
	for prefix, inf := range map[string]cache.SharedIndexInformer{
		claimKey: core.PersistentVolumeClaims().Informer(), volumeKey: core.PersistentVolumes().Informer(),
	} {
		if _, err := inf.AddEventHandler(enqueue(prefix)); err != nil {
			return nil, fmt.Errorf("localpath: handler: %w", err)
		}
		c.synced = append(c.synced, inf.HasSynced)
	}
	c.synced = append(c.synced, storage.StorageClasses().Informer().HasSynced, core.Nodes().Informer().HasSynced)
	return c, nil
}

// Run makes the default class when missing, then provisions and reclaims
// until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) error {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("localpath: wait for caches: %w", ctx.Err())
	}
	if _, err := c.cfg.Client.StorageV1().StorageClasses().Create(ctx, DefaultClass(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		c.log.Warn("default StorageClass not created", "class", ClassName, "err", err)
	}
	keyqueue.Run(ctx, c.queue, workers, c.reconcile, c.log)
	return nil
}

func (c *Controller) reconcile(ctx context.Context, key string) error {
	if name, ok := strings.CutPrefix(key, volumeKey); ok {
		return c.reclaim(ctx, name)
	}
	ns, name, err := cache.SplitMetaNamespaceKey(strings.TrimPrefix(key, claimKey))
	if err != nil {
		return nil
	}
	return c.provision(ctx, ns, name)
}

// provision makes the volume of a claim handed to this provisioner.
func (c *Controller) provision(ctx context.Context, ns, name string) error {
	claim, err := c.claims.PersistentVolumeClaims(ns).Get(name)
	if apierrors.IsNotFound(err) || (err == nil && !wantsVolume(claim)) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := c.volumes.Get(VolumeName(claim)); err == nil {
		return nil // made already; the PersistentVolume controller binds it
	}
	class, err := c.classes.Get(volumehelpers.GetPersistentVolumeClaimClass(claim))
	if err != nil {
		return fmt.Errorf("class of claim %s/%s: %w", ns, name, err)
	}
	node, err := c.nodes.Get(claim.Annotations[annSelectedNode])
	if err != nil && claim.Annotations[annSelectedNode] != "" {
		return fmt.Errorf("selected node of claim %s/%s: %w", ns, name, err)
	}
	if node == nil {
		node = &corev1.Node{}
	}
	pv, err := PlanVolume(claim, class, node)
	if errors.Is(err, ErrNotForUs) {
		return nil
	}
	if err != nil {
		c.cfg.Recorder.Eventf(claim, corev1.EventTypeWarning, "ProvisioningFailed", "failed to provision volume with StorageClass %q: %v", class.Name, err)
		return nil // a claim change (or a node's directory) requeues it
	}
	c.cfg.Recorder.Eventf(claim, corev1.EventTypeNormal, "Provisioning", "External provisioner is provisioning volume for claim %q", ns+"/"+name)
	if _, err := c.cfg.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create volume %s for claim %s/%s: %w", pv.Name, ns, name, err)
	}
	c.cfg.Recorder.Eventf(claim, corev1.EventTypeNormal, "ProvisioningSucceeded", "Successfully provisioned volume %s", pv.Name)
	c.log.Info("provisioned", "claim", ns+"/"+name, "volume", pv.Name, "node", node.Name, "path", pv.Spec.Local.Path)
	return nil
}

// reclaim hands a released volume's directory to its node, then deletes
// the volume.
func (c *Controller) reclaim(ctx context.Context, name string) error {
	pv, err := c.volumes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	hostname, dir, ok := Reclaim(pv)
	if !ok {
		return nil
	}
	if err := c.requestCleanup(ctx, hostname, dir); err != nil {
		return fmt.Errorf("reclaim volume %s: %w", name, err)
	}
	err = c.cfg.Client.CoreV1().PersistentVolumes().Delete(ctx, name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &pv.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete volume %s: %w", name, err)
	}
	c.log.Info("reclaimed", "volume", name, "node", hostname, "path", dir)
	return nil
}

// requestCleanup adds dir to the cleanup list of the node whose hostname
// label (or name) is hostname. A node that is gone took its disk along.
func (c *Controller) requestCleanup(ctx context.Context, hostname, dir string) error {
	node := c.nodeByHostname(hostname)
	if node == "" {
		return nil
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.cfg.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		dirs := nodelocalpath.CleanupList(n)
		if slices.Contains(dirs, dir) {
			return nil
		}
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[AnnotationCleanup] = nodelocalpath.CleanupValue(append(dirs, dir))
		_, err = c.cfg.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

func (c *Controller) nodeByHostname(hostname string) string {
	if n, err := c.nodes.Get(hostname); err == nil {
		return n.Name
	}
	all, err := c.nodes.List(labels.Everything())
	if err != nil {
		return ""
	}
	for _, n := range all {
		if n.Labels[corev1.LabelHostname] == hostname {
			return n.Name
		}
	}
	return ""
}
