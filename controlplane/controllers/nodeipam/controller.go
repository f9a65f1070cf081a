// Package nodeipam gives every node a pod CIDR out of the cluster CIDR, as
// upstream's node IPAM controller does with its range allocator: node
// subnets are handed out round-robin, allocations are rebuilt from the
// nodes at start so an existing CIDR is never handed out twice, and a
// deleted node's subnet is released.
package nodeipam

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"

	"github.com/nodelet/nodelet/controlplane/controllers/keyqueue"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
)

// Defaults, as upstream's kube-controller-manager flags.
const (
	DefaultClusterCIDR      = "10.244.0.0/16"
	DefaultNodeMaskSize     = 24
	DefaultNodeMaskSizeIPv6 = 64
)

// Event reasons and the NetworkUnavailable reason this controller owns.
const (
	ReasonCIDRNotAvailable     = "CIDRNotAvailable"
	ReasonCIDRAssignmentFailed = "CIDRAssignmentFailed"
	reasonCIDRAssigned         = "CIDRAssigned"
)

// Config configures the controller. ClusterCIDR may hold one IPv4 and one
// IPv6 CIDR, comma-separated (dual stack); each node then gets one of each.
type Config struct {
	Client    kubernetes.Interface
	Informers informers.SharedInformerFactory
	Recorder  record.EventRecorder
	Log       *slog.Logger

	ClusterCIDR      string // default DefaultClusterCIDR
	NodeMaskSize     int    // IPv4 node prefix length, default 24
	NodeMaskSizeIPv6 int    // default 64
}

// Controller assigns spec.podCIDR(s).
type Controller struct {
	client   kubernetes.Interface
	recorder record.EventRecorder
	log      *slog.Logger
	nodes    corelisters.NodeLister
	synced   cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]
	alloc    *allocator
}

// New validates cfg and registers the node handlers.
func New(cfg Config) (*Controller, error) {
	if cfg.Client == nil || cfg.Informers == nil || cfg.Recorder == nil {
		return nil, errors.New("nodeipam: Client, Informers and Recorder are required")
	}
	if cfg.ClusterCIDR == "" {
		cfg.ClusterCIDR = DefaultClusterCIDR
	}
	if cfg.NodeMaskSize == 0 {
		cfg.NodeMaskSize = DefaultNodeMaskSize
	}
	if cfg.NodeMaskSizeIPv6 == 0 {
		cfg.NodeMaskSizeIPv6 = DefaultNodeMaskSizeIPv6
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	alloc, err := newAllocator(cfg.ClusterCIDR, cfg.NodeMaskSize, cfg.NodeMaskSizeIPv6)
	if err != nil {
		return nil, err
	}
	inf := cfg.Informers.Core().V1().Nodes()
	c := &Controller{
		client: cfg.Client, recorder: cfg.Recorder, alloc: alloc,
		log:   cfg.Log.With("controller", "nodeipam"),
		nodes: inf.Lister(), synced: inf.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "nodeipam"}),
	}
	_, err = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueue,
		UpdateFunc: func(oldObj, newObj any) {
			o, n := oldObj.(*corev1.Node), newObj.(*corev1.Node)
			// Status heartbeats are the bulk of node updates; only a
			// missing or changed CIDR is work.
			if len(n.Spec.PodCIDRs) == 0 || !slices.Equal(o.Spec.PodCIDRs, n.Spec.PodCIDRs) {
				c.enqueue(newObj)
			}
		},
		DeleteFunc: c.enqueue,
	})
	if err != nil {
		return nil, fmt.Errorf("nodeipam: add node handler: %w", err)
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

// Run rebuilds the allocations from the existing nodes, then assigns CIDRs
// with workers goroutines until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) error {
	defer c.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return fmt.Errorf("nodeipam: wait for cache sync: %w", ctx.Err())
	}
	// Every existing CIDR must be occupied before the first allocation,
	// or a restarted controller would hand out the first subnet again.
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("nodeipam: list nodes: %w", err)
	}
	for _, n := range nodes {
		if err := c.alloc.occupy(n.Name, n.Spec.PodCIDRs); err != nil {
			c.log.Warn("node CIDR not in the cluster CIDR; ignored", "node", n.Name, "err", err)
		}
	}
	c.log.Info("started", "nodes", len(nodes))
	keyqueue.Run(ctx, c.queue, workers, c.Reconcile, c.log)
	return nil
}

// Reconcile makes node name hold its CIDRs: it records CIDRs the node has,
// assigns new ones to a node without, and releases a deleted node's.
func (c *Controller) Reconcile(ctx context.Context, name string) error {
	node, err := c.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		c.alloc.release(name)
		c.requeueWaiting()
		return nil
	}
	if err != nil {
		return fmt.Errorf("get node %s: %w", name, err)
	}
	if len(node.Spec.PodCIDRs) > 0 {
		if err := c.alloc.occupy(name, node.Spec.PodCIDRs); err != nil {
			c.log.Warn("node CIDR not in the cluster CIDR; ignored", "node", name, "err", err)
		}
		return nil
	}
	cidrs, err := c.alloc.allocate(name)
	if errors.Is(err, ErrCIDRRangeFull) {
		c.recordNodeStatus(node, ReasonCIDRNotAvailable)
		if uerr := c.setNetworkUnavailable(ctx, name, err); uerr != nil {
			return errors.Join(err, uerr)
		}
		return fmt.Errorf("allocate CIDR for node %s: %w", name, err)
	}
	if err != nil {
		return fmt.Errorf("allocate CIDR for node %s: %w", name, err)
	}
	if err := c.patchCIDRs(ctx, name, cidrs); err != nil {
		if apierrors.IsNotFound(err) {
			c.alloc.release(name)
			return nil
		}
		c.recordNodeStatus(node, ReasonCIDRAssignmentFailed)
		return fmt.Errorf("patch CIDRs of node %s: %w", name, err)
	}
	c.log.Info("assigned pod CIDR", "node", name, "cidrs", cidrs)
	return c.clearNetworkUnavailable(ctx, node)
}

// requeueWaiting retries, without their backoff, the nodes still waiting
// for a CIDR, since a release may have made room for them.
func (c *Controller) requeueWaiting() {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return
	}
	for _, n := range nodes {
		if len(n.Spec.PodCIDRs) == 0 {
			c.queue.Forget(n.Name)
			c.queue.Add(n.Name)
		}
	}
}

func (c *Controller) patchCIDRs(ctx context.Context, name string, cidrs []netip.Prefix) error {
	strs := make([]string, len(cidrs))
	for i, p := range cidrs {
		strs[i] = p.String()
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"podCIDR": strs[0], "podCIDRs": strs}})
	if err != nil {
		return err
	}
	_, err = c.client.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	return err
}

// setNetworkUnavailable marks a node that cannot get a CIDR as having no
// pod network, so TaintNodesByCondition keeps pods off it.
func (c *Controller) setNetworkUnavailable(ctx context.Context, name string, cause error) error {
	cond := corev1.NodeCondition{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionTrue,
		Reason: ReasonCIDRNotAvailable, Message: fmt.Sprintf("No pod CIDR available: %v", cause)}
	return c.updateCondition(ctx, name, cond, func(cur *corev1.NodeCondition) bool {
		return cur == nil || cur.Status != corev1.ConditionTrue || cur.Reason != ReasonCIDRNotAvailable
	})
}

// clearNetworkUnavailable undoes setNetworkUnavailable once the node has a
// CIDR; a NetworkUnavailable condition set by anyone else is left alone.
func (c *Controller) clearNetworkUnavailable(ctx context.Context, node *corev1.Node) error {
	if cur := findCondition(node.Status.Conditions, corev1.NodeNetworkUnavailable); cur == nil || cur.Reason != ReasonCIDRNotAvailable {
		return nil
	}
	cond := corev1.NodeCondition{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse,
		Reason: reasonCIDRAssigned, Message: "Pod CIDR assigned"}
	return c.updateCondition(ctx, node.Name, cond, func(cur *corev1.NodeCondition) bool {
		return cur != nil && cur.Reason == ReasonCIDRNotAvailable
	})
}

// updateCondition sets cond on the live node when need says so.
func (c *Controller) updateCondition(ctx context.Context, name string, cond corev1.NodeCondition, need func(*corev1.NodeCondition) bool) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur := findCondition(node.Status.Conditions, cond.Type)
		if !need(cur) {
			return nil
		}
		now := metav1.Now()
		cond.LastHeartbeatTime, cond.LastTransitionTime = now, now
		if cur != nil {
			if cur.Status == cond.Status {
				cond.LastTransitionTime = cur.LastTransitionTime
			}
			*cur = cond
		} else {
			node.Status.Conditions = append(node.Status.Conditions, cond)
		}
		_, err = c.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("set %s on node %s: %w", cond.Type, name, err)
	}
	return nil
}

// recordNodeStatus records an event the way upstream's
// RecordNodeStatusChange does: on a reference whose UID is the node name,
// which is what kubectl describe node looks for.
func (c *Controller) recordNodeStatus(node *corev1.Node, status string) {
	ref := &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: types.UID(node.Name)}
	c.recorder.Eventf(ref, corev1.EventTypeNormal, status, "Node %s status is now: %s", node.Name, status)
}

func findCondition(conds []corev1.NodeCondition, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}
