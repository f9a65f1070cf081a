// Package podgc is the pod garbage collector, with the semantics of
// upstream's pkg/controller/podgc (which cannot be linked here: see
// controlplane/controllers/upstream). Every Period it force-deletes
// terminated pods beyond a threshold (oldest first), terminating pods on
// NotReady nodes tainted out-of-service, pods bound to nodes that are gone
// (after a quarantine and a direct GET), and terminating pods that were
// never bound. Pods not yet terminal are marked Failed first; orphans also
// get the DisruptionTarget condition. Plan decides, execute acts.
package podgc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Defaults, as upstream.
const (
	DefaultPeriod           = 20 * time.Second // gcCheckPeriod
	DefaultQuarantine       = 40 * time.Second // quarantineTime
	DefaultTerminatedPodMax = 12500            // --terminated-pod-gc-threshold
)

// Config configures the collector.
type Config struct {
	Client    kubernetes.Interface
	Informers informers.SharedInformerFactory
	Log       *slog.Logger
	// TerminatedPodThreshold is how many terminated pods may exist before
	// the oldest are deleted; 0 or less disables that part, as upstream.
	TerminatedPodThreshold int
	// Period between passes (default DefaultPeriod); Quarantine is how
	// long a node must stay missing before its pods are orphans (default
	// DefaultQuarantine). Tests shorten both.
	Period, Quarantine time.Duration
}

// Controller is the pod garbage collector.
type Controller struct {
	cfg    Config
	log    *slog.Logger
	pods   corelisters.PodLister
	nodes  corelisters.NodeLister
	synced []cache.InformerSynced
	quar   quarantine // owned by the pass loop
}

// New builds the collector on the shared pod and node informers; call it
// before the factory is started.
func New(cfg Config) (*Controller, error) {
	if cfg.Client == nil || cfg.Informers == nil {
		return nil, errors.New("podgc: Client and Informers are required")
	}
	if cfg.Period <= 0 {
		cfg.Period = DefaultPeriod
	}
	if cfg.Quarantine <= 0 {
		cfg.Quarantine = DefaultQuarantine
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	core := cfg.Informers.Core().V1()
	return &Controller{
		cfg: cfg, log: cfg.Log.With("controller", "podgc"),
		pods: core.Pods().Lister(), nodes: core.Nodes().Lister(),
		synced: []cache.InformerSynced{core.Pods().Informer().HasSynced, core.Nodes().Informer().HasSynced},
		quar:   quarantine{},
	}, nil
}

// Run waits for the caches, then runs a pass every Period until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return nil // ctx ended
	}
	c.log.Info("started", "period", c.cfg.Period, "quarantine", c.cfg.Quarantine, "terminatedThreshold", c.cfg.TerminatedPodThreshold)
	wait.UntilWithContext(ctx, c.pass, c.cfg.Period)
	return nil
}

// pass reads the caches, checks the nodes whose quarantine is over, plans
// and executes.
func (c *Controller) pass(ctx context.Context) {
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		c.log.Error("list pods", "err", err)
		return
	}
	nodeList, err := c.nodes.List(labels.Everything())
	if err != nil {
		c.log.Error("list nodes", "err", err)
		return
	}
	nodes := make(map[string]*corev1.Node, len(nodeList))
	for _, n := range nodeList {
		nodes[n.Name] = n
	}
	now := time.Now()
	gone := map[string]bool{}
	for _, name := range c.quar.observe(pods, nodes, now, c.cfg.Quarantine) {
		exists, err := c.nodeExists(ctx, name)
		if err != nil {
			c.log.Warn("node check failed; quarantined again", "node", name, "err", err)
			continue
		}
		gone[name] = !exists
	}
	for _, a := range Plan(Input{Pods: pods, Nodes: nodes, Gone: gone, Threshold: c.cfg.TerminatedPodThreshold, Now: now}) {
		if err := c.execute(ctx, a); err != nil {
			c.log.Warn("collect pod failed", "pod", key(a.Pod), "reason", a.Reason, "err", err)
			continue
		}
		c.log.Info("pod force-deleted", "pod", key(a.Pod), "node", a.Pod.Spec.NodeName, "reason", a.Reason)
	}
}

// nodeExists asks the API server directly, past the informer.
func (c *Controller) nodeExists(ctx context.Context, name string) (bool, error) {
	_, err := c.cfg.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get node %s: %w", name, err)
	}
	return true, nil
}

// execute carries out one action: mark the pod Failed (with the
// condition) if asked, then delete it with grace 0. Both are guarded by
// the pod's UID; a pod already gone is fine.
func (c *Controller) execute(ctx context.Context, a Action) error {
	p := a.Pod
	if a.MarkFailed {
		if err := c.markFailed(ctx, p, a.Condition); apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
	}
	zero := int64(0)
	err := c.cfg.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &p.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete pod %s: %w", key(p), err)
	}
	return nil
}

// markFailed patches the pod's status to phase Failed, adding cond when
// set (a strategic merge on conditions by type), as upstream does so that
// a pod no kubelet will report on ends terminal.
func (c *Controller) markFailed(ctx context.Context, p *corev1.Pod, cond *corev1.PodCondition) error {
	status := map[string]any{"phase": corev1.PodFailed, "observedGeneration": p.Generation}
	if cond != nil {
		status["conditions"] = []corev1.PodCondition{*cond}
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": p.UID}, "status": status})
	if err != nil {
		return fmt.Errorf("encode status patch for pod %s: %w", key(p), err)
	}
	_, err = c.cfg.Client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, body, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("mark pod %s failed: %w", key(p), err)
	}
	return nil
}

func key(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }
