// Package cache keeps the scheduler's view of nodes and of the pods on
// them: pods the informer reports bound, and pods the scheduler assumed
// onto a node while their binding is in flight.
//
// Every NodeInfo the cache publishes is immutable: a change replaces it
// with a modified clone. A Snapshot is therefore just a copy of the slice
// of NodeInfo pointers, taken once per scheduling cycle and read without
// locks while the cache moves on.
package cache

import (
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/controlplane/scheduler/framework"
)

// ErrAlreadyCached is returned when assuming a pod the cache already holds.
var ErrAlreadyCached = errors.New("cache: pod already in cache")

type podState struct {
	info    *framework.PodInfo
	node    string
	assumed bool
}

// Cache is safe for concurrent use.
type Cache struct {
	mu sync.Mutex
	// infos holds every NodeInfo, including placeholders (Node nil) for
	// nodes pods are bound to but the node informer has not reported.
	infos map[string]*framework.NodeInfo
	// list holds the NodeInfos of known nodes, idx their positions.
	list []*framework.NodeInfo
	idx  map[string]int
	pods map[string]*podState
	gen  uint64
	// dirty lists positions in list replaced since the last snapshot
	// update; listGen changes when nodes are added or removed (positions
	// move), which forces a full copy.
	dirty   []int
	listGen uint64
	// antiPods counts cached pods with required pod anti-affinity; while
	// zero the inter-pod filter need not look at existing pods.
	antiPods int
}

// Snapshot is the set of known nodes at one instant. Its NodeInfos must
// not be modified. A Snapshot is owned by one goroutine (the scheduling
// loop), which refreshes it in place with UpdateSnapshot between cycles.
type Snapshot struct {
	Nodes []*framework.NodeInfo
	// HaveAntiAffinityPods: some cached pod has required anti-affinity.
	HaveAntiAffinityPods bool
	gen, listGen         uint64
	valid                bool
}

// New returns an empty cache.
func New() *Cache {
	return &Cache{infos: map[string]*framework.NodeInfo{}, idx: map[string]int{}, pods: map[string]*podState{}}
}

// UpdateSnapshot brings snap up to date, copying only the NodeInfos that
// changed since the last update (the cache tracks one consumer: pass the
// same Snapshot every time, or a new zero Snapshot for a full copy).
func (c *Cache) UpdateSnapshot(snap *Snapshot) {
	c.mu.Lock()
	defer c.mu.Unlock()
	snap.HaveAntiAffinityPods = c.antiPods > 0
	switch {
	case snap.valid && snap.gen == c.gen:
	case snap.valid && snap.listGen == c.listGen:
		for _, i := range c.dirty {
			snap.Nodes[i] = c.list[i]
		}
	default:
		snap.Nodes = append(snap.Nodes[:0], c.list...)
	}
	c.dirty = c.dirty[:0]
	snap.gen, snap.listGen, snap.valid = c.gen, c.listGen, true
}

// mutate replaces node name's NodeInfo by a clone changed by f. Callers
// hold c.mu.
func (c *Cache) mutate(name string, f func(n *framework.NodeInfo)) {
	var n *framework.NodeInfo
	if old := c.infos[name]; old != nil {
		n = old.Clone()
	} else {
		n = &framework.NodeInfo{}
	}
	f(n)
	c.gen++
	if n.Node == nil && len(n.Pods) == 0 {
		delete(c.infos, name)
		return
	}
	c.infos[name] = n
	if i, ok := c.idx[name]; ok {
		c.list[i] = n
		c.dirty = append(c.dirty, i)
	}
}

// AddNode adds or updates a node.
func (c *Cache) AddNode(node *corev1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mutate(node.Name, func(n *framework.NodeInfo) { n.SetNode(node) })
	if _, ok := c.idx[node.Name]; !ok {
		c.idx[node.Name] = len(c.list)
		c.list = append(c.list, c.infos[node.Name])
		c.listGen++
	}
}

// RemoveNode removes a node; its pods stay accounted on a placeholder
// until they are removed too.
func (c *Cache) RemoveNode(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i, ok := c.idx[name]
	if !ok {
		return
	}
	last := len(c.list) - 1
	c.list[i] = c.list[last]
	c.idx[c.list[i].Name()] = i
	c.list[last] = nil
	c.list = c.list[:last]
	delete(c.idx, name)
	c.listGen++
	c.mutate(name, func(n *framework.NodeInfo) { n.Node, n.Labels = nil, nil })
}

// AssumePod accounts pi on node before its binding is confirmed.
func (c *Cache) AssumePod(pi *framework.PodInfo, node string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.pods[pi.Key]; ok {
		return fmt.Errorf("assume %s: %w", pi.Key, ErrAlreadyCached)
	}
	c.addLocked(pi, node, true)
	return nil
}

// ForgetPod drops an assumed pod (its binding failed). Confirmed pods are
// left alone.
func (c *Cache) ForgetPod(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.pods[key]; ok && st.assumed {
		c.removeLocked(key, st)
	}
}

// IsAssumed reports whether key is assumed and not yet confirmed.
func (c *Cache) IsAssumed(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.pods[key]
	return ok && st.assumed
}

// AddPod records a pod the informer reports bound to a node (confirming
// an assumed pod). Pods that finished (Succeeded or Failed) release their
// resources and are removed instead.
func (c *Cache) AddPod(pod *corev1.Pod) {
	key := pod.Namespace + "/" + pod.Name
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.pods[key]
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed || pod.Spec.NodeName == "" {
		if ok {
			c.removeLocked(key, st)
		}
		return
	}
	if ok && st.node == pod.Spec.NodeName && st.info.Pod.UID == pod.UID && !framework.Relevant(st.info.Pod, pod) {
		st.assumed = false // nothing the scheduler accounts for changed
		return
	}
	if ok {
		c.removeLocked(key, st)
	}
	c.addLocked(framework.NewPodInfo(pod), pod.Spec.NodeName, false)
}

// RemovePod forgets a pod (deleted, or no longer bound).
func (c *Cache) RemovePod(pod *corev1.Pod) {
	key := pod.Namespace + "/" + pod.Name
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.pods[key]; ok {
		c.removeLocked(key, st)
	}
}

func (c *Cache) addLocked(pi *framework.PodInfo, node string, assumed bool) {
	c.pods[pi.Key] = &podState{info: pi, node: node, assumed: assumed}
	if len(pi.RequiredAntiAffinity) > 0 {
		c.antiPods++
	}
	c.mutate(node, func(n *framework.NodeInfo) { n.AddPod(pi) })
}

func (c *Cache) removeLocked(key string, st *podState) {
	delete(c.pods, key)
	if len(st.info.RequiredAntiAffinity) > 0 {
		c.antiPods--
	}
	c.mutate(st.node, func(n *framework.NodeInfo) { n.RemovePod(key) })
}

// NodeInfo returns the current NodeInfo of a node (nil if unknown); for
// tests and diagnostics.
func (c *Cache) NodeInfo(name string) *framework.NodeInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.infos[name]
}

// Counts returns the number of known nodes and cached pods.
func (c *Cache) Counts() (nodes, pods int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.list), len(c.pods)
}
