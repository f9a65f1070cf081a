// Package nodelifecycle watches node heartbeats (Leases in kube-node-lease
// and the Ready condition) the way upstream's node lifecycle controller
// does: a node silent for longer than the grace period gets its kubelet
// conditions set to Unknown and its pods marked not ready; node conditions
// become NoSchedule taints (TaintNodesByCondition) and the Ready condition a
// NoExecute taint (unreachable or not-ready); and pods on a node with
// NoExecute taints they do not tolerate, or tolerate only for a while, are
// evicted (taint-based eviction).
package nodelifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nodelet/nodelet/controlplane/controllers/keyqueue"

	corev1 "k8s.io/api/core/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	coordlisters "k8s.io/client-go/listers/coordination/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// Defaults, as upstream's kube-controller-manager flags.
const (
	DefaultGracePeriod           = 50 * time.Second // --node-monitor-grace-period
	DefaultMonitorPeriod         = 5 * time.Second  // --node-monitor-period
	DefaultStartupGracePeriod    = 60 * time.Second // --node-startup-grace-period
	DefaultEvictionRate          = 0.1              // --node-eviction-rate, nodes/s per zone
	DefaultSecondaryEvictionRate = 0.01             // --secondary-node-eviction-rate
)

// Event reasons, as upstream.
const (
	ReasonNodeNotReady         = "NodeNotReady"
	ReasonTaintManagerEviction = "TaintManagerEviction"
	ReasonRegisteredNode       = "RegisteredNode"
	ReasonRemovingNode         = "RemovingNode"
)

const podNodeIndex = "nodelifecycle.spec.nodeName"

// Config configures the controller.
type Config struct {
	Client    kubernetes.Interface
	Informers informers.SharedInformerFactory
	Recorder  record.EventRecorder
	Log       *slog.Logger

	// GracePeriod is how long a node may go without a heartbeat (lease
	// renewal or Ready heartbeat) before it is Unknown.
	GracePeriod time.Duration
	// StartupGracePeriod replaces GracePeriod for a node that never posted
	// a Ready condition.
	StartupGracePeriod time.Duration
	// MonitorPeriod is how often node health is checked.
	MonitorPeriod time.Duration
	// EvictionRate and SecondaryEvictionRate limit how many nodes a second
	// get a NoExecute taint per zone (burst 1); see taintRate.
	EvictionRate, SecondaryEvictionRate float64
	// Clock drives the monitor, heartbeat ages and eviction deadlines;
	// tests pass a fake one. Default: the real clock.
	Clock clock.WithTickerAndDelayedExecution
}

// Controller is the node lifecycle controller. It runs three loops: the
// health monitor (on Clock's ticker), a node queue applying the
// condition NoSchedule taints, and a pod queue doing taint eviction.
type Controller struct {
	cfg      Config
	client   kubernetes.Interface
	recorder record.EventRecorder
	log      *slog.Logger
	clock    clock.WithTickerAndDelayedExecution

	nodes    corelisters.NodeLister
	leases   coordlisters.LeaseLister
	pods     corelisters.PodLister
	podIndex cache.Indexer
	synced   []cache.InformerSynced

	nodeQueue workqueue.TypedRateLimitingInterface[string] // NoSchedule taints
	podQueue  workqueue.TypedRateLimitingInterface[string] // eviction checks

	// Owned by the monitor goroutine.
	health       map[string]*nodeHealth
	lastTaint    map[string]time.Time // zone -> last NoExecute taint added
	allDisrupted bool

	mu        sync.Mutex
	timers    map[string]scheduled            // pod key -> pending eviction
	firstSeen map[string]map[string]time.Time // node -> taint key -> first seen (taints without timeAdded)
	afterPass func()                          // test hook: called after each monitor pass
}

type scheduled struct {
	at    time.Time
	timer clock.Timer
}

// New validates cfg, applies defaults and registers the informer handlers.
func New(cfg Config) (*Controller, error) {
	if cfg.Client == nil || cfg.Informers == nil || cfg.Recorder == nil {
		return nil, errors.New("nodelifecycle: Client, Informers and Recorder are required")
	}
	setDefaults(&cfg)
	if cfg.GracePeriod <= cfg.MonitorPeriod {
		return nil, fmt.Errorf("nodelifecycle: grace period %v must exceed the monitor period %v", cfg.GracePeriod, cfg.MonitorPeriod)
	}
	core := cfg.Informers.Core().V1()
	leaseInf := cfg.Informers.Coordination().V1().Leases()
	podInf := core.Pods().Informer()
	if _, ok := podInf.GetIndexer().GetIndexers()[podNodeIndex]; !ok {
		if err := podInf.AddIndexers(cache.Indexers{podNodeIndex: indexPodByNode}); err != nil {
			return nil, fmt.Errorf("nodelifecycle: add pod index: %w", err)
		}
	}
	c := &Controller{
		cfg: cfg, client: cfg.Client, recorder: cfg.Recorder, clock: cfg.Clock,
		log:   cfg.Log.With("controller", "nodelifecycle"),
		nodes: core.Nodes().Lister(), leases: leaseInf.Lister(), pods: core.Pods().Lister(), podIndex: podInf.GetIndexer(),
		synced: []cache.InformerSynced{core.Nodes().Informer().HasSynced, leaseInf.Informer().HasSynced, podInf.HasSynced},
		nodeQueue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "nodelifecycle-nodes"}),
		podQueue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "nodelifecycle-pods"}),
		health: map[string]*nodeHealth{}, lastTaint: map[string]time.Time{},
		timers: map[string]scheduled{}, firstSeen: map[string]map[string]time.Time{},
	}
	if _, err := core.Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.nodeAdded, UpdateFunc: c.nodeUpdated, DeleteFunc: c.nodeDeleted,
	}); err != nil {
		return nil, fmt.Errorf("nodelifecycle: add node handler: %w", err)
	}
	if _, err := podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.podAdded, UpdateFunc: c.podUpdated, DeleteFunc: c.podDeleted,
	}); err != nil {
		return nil, fmt.Errorf("nodelifecycle: add pod handler: %w", err)
	}
	return c, nil
}

func setDefaults(cfg *Config) {
	if cfg.GracePeriod == 0 {
		cfg.GracePeriod = DefaultGracePeriod
	}
	if cfg.StartupGracePeriod == 0 {
		cfg.StartupGracePeriod = DefaultStartupGracePeriod
	}
	if cfg.MonitorPeriod == 0 {
		cfg.MonitorPeriod = DefaultMonitorPeriod
	}
	if cfg.EvictionRate == 0 {
		cfg.EvictionRate = DefaultEvictionRate
	}
	if cfg.SecondaryEvictionRate == 0 {
		cfg.SecondaryEvictionRate = DefaultSecondaryEvictionRate
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
}

func indexPodByNode(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return nil, nil
	}
	return []string{pod.Spec.NodeName}, nil
}

// podsOnNode lists the cached pods bound to node.
func (c *Controller) podsOnNode(node string) []*corev1.Pod {
	objs, err := c.podIndex.ByIndex(podNodeIndex, node)
	if err != nil {
		return nil
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	return pods
}

func nodeOf(obj any) *corev1.Node {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	n, _ := obj.(*corev1.Node)
	return n
}

func (c *Controller) nodeAdded(obj any) {
	n := nodeOf(obj)
	if n == nil {
		return
	}
	c.nodeQueue.Add(n.Name)
	c.noteTaints(n)
	c.enqueuePodsOn(n.Name)
}

func (c *Controller) nodeUpdated(oldObj, newObj any) {
	o, n := nodeOf(oldObj), nodeOf(newObj)
	if o == nil || n == nil {
		return
	}
	if !slices.Equal(noScheduleTaints(o), noScheduleTaints(n)) || !slices.EqualFunc(o.Spec.Taints, n.Spec.Taints, taintEqual) {
		c.nodeQueue.Add(n.Name)
	}
	if !slices.EqualFunc(noExecuteTaints(o), noExecuteTaints(n), taintEqual) {
		c.noteTaints(n)
		c.enqueuePodsOn(n.Name)
	}
}

func (c *Controller) nodeDeleted(obj any) {
	n := nodeOf(obj)
	if n == nil {
		return
	}
	c.mu.Lock()
	delete(c.firstSeen, n.Name)
	c.mu.Unlock()
	c.enqueuePodsOn(n.Name)
}

func taintEqual(a, b corev1.Taint) bool {
	return a.Key == b.Key && a.Value == b.Value && a.Effect == b.Effect && a.TimeAdded.Equal(b.TimeAdded)
}

// noteTaints remembers when NoExecute taints without a timeAdded were
// first seen, so their toleration periods have a fixed start.
func (c *Controller) noteTaints(n *corev1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[string]time.Time{}
	for _, t := range noExecuteTaints(n) {
		if t.TimeAdded != nil {
			continue
		}
		k := t.Key + "=" + t.Value
		if at, ok := c.firstSeen[n.Name][k]; ok {
			seen[k] = at
		} else {
			seen[k] = c.clock.Now()
		}
	}
	if len(seen) == 0 {
		delete(c.firstSeen, n.Name)
		return
	}
	c.firstSeen[n.Name] = seen
}

func (c *Controller) taintAdded(node string) func(corev1.Taint) time.Time {
	return func(t corev1.Taint) time.Time {
		if t.TimeAdded != nil {
			return t.TimeAdded.Time
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if at, ok := c.firstSeen[node][t.Key+"="+t.Value]; ok {
			return at
		}
		return c.clock.Now()
	}
}

func (c *Controller) enqueuePodsOn(node string) {
	for _, p := range c.podsOnNode(node) {
		c.enqueuePod(p)
	}
}

func (c *Controller) enqueuePod(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.podQueue.Add(key)
}

func (c *Controller) podAdded(obj any) {
	if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
		c.enqueuePod(p)
	}
}

// podUpdated rechecks a pod whose node or tolerations changed, the only
// pod fields eviction depends on.
func (c *Controller) podUpdated(oldObj, newObj any) {
	o, ok1 := oldObj.(*corev1.Pod)
	n, ok2 := newObj.(*corev1.Pod)
	if !ok1 || !ok2 || n.Spec.NodeName == "" {
		return
	}
	if o.Spec.NodeName != n.Spec.NodeName || !slices.EqualFunc(o.Spec.Tolerations, n.Spec.Tolerations, tolerationEqual) {
		c.enqueuePod(n)
	}
}

func tolerationEqual(a, b corev1.Toleration) bool {
	return a.MatchToleration(&b) && ptr.Equal(a.TolerationSeconds, b.TolerationSeconds)
}

func (c *Controller) podDeleted(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err == nil {
		c.cancelEviction(key, false)
	}
}

// Run waits for the caches, then runs the health monitor on the clock's
// ticker, workers goroutines for each queue, until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) error {
	defer c.nodeQueue.ShutDown()
	defer c.podQueue.ShutDown()
	defer c.stopTimers()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("nodelifecycle: wait for cache sync: %w", ctx.Err())
	}
	c.log.Info("started", "gracePeriod", c.cfg.GracePeriod, "monitorPeriod", c.cfg.MonitorPeriod)
	for i := 0; i < max(workers, 1); i++ {
		go wait.UntilWithContext(ctx, func(ctx context.Context) { keyqueue.Work(ctx, c.nodeQueue, c.reconcileNodeTaints, c.log) }, time.Second)
		go wait.UntilWithContext(ctx, func(ctx context.Context) { keyqueue.Work(ctx, c.podQueue, c.reconcilePod, c.log) }, time.Second)
	}
	ticker := c.clock.NewTicker(c.cfg.MonitorPeriod)
	defer ticker.Stop()
	for {
		c.monitorNodeHealth(ctx)
		if c.afterPass != nil {
			c.afterPass()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
		}
	}
}
