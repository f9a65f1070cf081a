package nodelifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

// nodeHealth is what the monitor last saw of a node. Heartbeat ages are
// measured on the controller's clock from when a change was observed, not
// from the timestamps the kubelet wrote, so clock skew between machines
// does not matter (as upstream).
type nodeHealth struct {
	probe      time.Time // last observed heartbeat
	hadReady   bool
	heartbeat  metav1.Time // Ready condition's lastHeartbeatTime then
	leaseRenew time.Time   // lease renewTime then
}

// nodeResult is one node's outcome of a monitor pass.
type nodeResult struct {
	node     *corev1.Node
	observed corev1.ConditionStatus // Ready before this pass
	current  *corev1.NodeCondition  // Ready after it (nil: never posted, still in startup grace)
}

// monitorNodeHealth is one pass over all nodes: update each node's health
// (Unknown when silent), note NotReady transitions, mark pods on not-ready
// nodes not ready, then apply NoExecute taints zone by zone, or none at
// all when every zone is fully disrupted.
func (c *Controller) monitorNodeHealth(ctx context.Context) {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		c.log.Error("list nodes", "err", err)
		return
	}
	now := c.clock.Now()
	c.forgetDeleted(nodes)
	results := make([]nodeResult, 0, len(nodes))
	zones := map[string][]corev1.ConditionStatus{}
	for _, n := range nodes {
		r, err := c.updateNodeHealth(ctx, n, now)
		if err != nil {
			c.log.Warn("update node health", "node", n.Name, "err", err)
			continue
		}
		results = append(results, r)
		if r.current == nil {
			continue
		}
		zones[zoneKey(r.node)] = append(zones[zoneKey(r.node)], r.current.Status)
		if r.observed == corev1.ConditionTrue && r.current.Status != corev1.ConditionTrue {
			c.recordNodeEvent(r.node.Name, corev1.EventTypeNormal, ReasonNodeNotReady, fmt.Sprintf("Node %s status is now: %s", r.node.Name, ReasonNodeNotReady))
		}
		if r.current.Status != corev1.ConditionTrue {
			if err := c.markPodsNotReady(ctx, r.node.Name); err != nil {
				c.log.Warn("mark pods not ready", "node", r.node.Name, "err", err)
			}
		}
	}
	states, allDisrupted := c.zoneStates(zones, now)
	for _, r := range results {
		if r.current == nil {
			continue
		}
		if err := c.applyNoExecute(ctx, r, states[zoneKey(r.node)], allDisrupted, len(nodes), now); err != nil {
			c.log.Warn("NoExecute taint", "node", r.node.Name, "err", err)
		}
	}
}

func (c *Controller) forgetDeleted(nodes []*corev1.Node) {
	live := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		live[n.Name] = true
	}
	for name := range c.health {
		if !live[name] {
			delete(c.health, name)
			c.recordNodeEvent(name, corev1.EventTypeNormal, ReasonRemovingNode, fmt.Sprintf("Removing Node %s from Controller", name))
		}
	}
}

// updateNodeHealth is upstream's tryUpdateNodeHealth: it refreshes the
// probe time from a changed Ready heartbeat or a renewed lease, and once
// the probe is older than the grace period writes the kubelet conditions
// as Unknown.
func (c *Controller) updateNodeHealth(ctx context.Context, node *corev1.Node, now time.Time) (nodeResult, error) {
	ready := findCondition(node.Status.Conditions, corev1.NodeReady)
	res := nodeResult{node: node, observed: corev1.ConditionUnknown, current: ready}
	grace := c.cfg.GracePeriod
	if ready != nil {
		res.observed = ready.Status
	} else {
		grace = c.cfg.StartupGracePeriod
	}
	h := c.health[node.Name]
	switch {
	case h == nil:
		// First sight (or a restart): the node gets a full grace period.
		h = &nodeHealth{probe: now}
		c.health[node.Name] = h
		c.recordNodeEvent(node.Name, corev1.EventTypeNormal, ReasonRegisteredNode, fmt.Sprintf("Registered Node %s in Controller", node.Name))
	case h.hadReady != (ready != nil):
		h.probe = now
	case ready != nil && !h.heartbeat.Equal(&ready.LastHeartbeatTime):
		h.probe = now
	}
	h.hadReady = ready != nil
	if ready != nil {
		h.heartbeat = ready.LastHeartbeatTime
	}
	if renew := c.leaseRenewTime(node.Name); !renew.IsZero() && renew.After(h.leaseRenew) {
		h.leaseRenew = renew
		h.probe = now
	}
	if !now.After(h.probe.Add(grace)) {
		return res, nil
	}
	updated := node.DeepCopy()
	if !markStatusUnknown(&updated.Status, node.CreationTimestamp, metav1.NewTime(now)) {
		return res, nil
	}
	c.log.Info("node stopped posting status", "node", node.Name, "lastProbe", h.probe)
	written, err := c.client.CoreV1().Nodes().UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if err != nil {
		// A conflict means the kubelet just wrote; the next pass sees it.
		return res, fmt.Errorf("set node %s conditions unknown: %w", node.Name, err)
	}
	res.node = written
	res.current = findCondition(written.Status.Conditions, corev1.NodeReady)
	return res, nil
}

func (c *Controller) leaseRenewTime(node string) time.Time {
	l, err := c.leases.Leases(corev1.NamespaceNodeLease).Get(node)
	if err != nil || l.Spec.RenewTime == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Time
}

// zoneStates computes each zone's state. When every zone is fully
// disrupted the controller assumes its own view of the cluster is broken
// and stops NoExecute tainting ("master disruption mode"); on leaving that
// mode all nodes get a fresh grace period, as upstream.
func (c *Controller) zoneStates(zones map[string][]corev1.ConditionStatus, now time.Time) (map[string]zoneState, bool) {
	states := make(map[string]zoneState, len(zones))
	all := len(zones) > 0
	for z, conds := range zones {
		states[z] = computeZoneState(conds)
		if states[z] != zoneFullDisruption {
			all = false
		}
	}
	switch {
	case all && !c.allDisrupted:
		c.log.Warn("no node is ready; stopping NoExecute taints and evictions")
	case !all && c.allDisrupted:
		c.log.Info("a node is ready again; resuming NoExecute taints")
		for _, h := range c.health {
			h.probe = now
		}
		clear(c.lastTaint)
	}
	c.allDisrupted = all
	return states, all
}

// applyNoExecute adds, swaps or removes a node's NoExecute taint as its
// Ready condition asks; new taints go through the zone's rate limit.
func (c *Controller) applyNoExecute(ctx context.Context, r nodeResult, state zoneState, allDisrupted bool, clusterSize int, now time.Time) error {
	action, want := decideNoExecute(r.current.Status, r.node.Spec.Taints)
	if allDisrupted {
		// Remove: nodes are presumed reachable while the controller
		// cannot tell.
		action, want = noExecuteRemove, corev1.Taint{}
		if !hasTaint(r.node.Spec.Taints, unreachableNoExecute) && !hasTaint(r.node.Spec.Taints, notReadyNoExecute) {
			return nil
		}
	}
	switch action {
	case noExecuteNone:
		return nil
	case noExecuteAdd:
		zone := zoneKey(r.node)
		rate := taintRate(state, clusterSize, c.cfg.EvictionRate, c.cfg.SecondaryEvictionRate)
		last, tainted := c.lastTaint[zone]
		if rate <= 0 || (tainted && now.Sub(last) < time.Duration(float64(time.Second)/rate)) {
			return nil
		}
		c.lastTaint[zone] = now
	}
	return c.updateTaints(ctx, r.node.Name, func(n *corev1.Node) ([]corev1.Taint, bool) {
		return setNoExecute(n.Spec.Taints, want, now)
	})
}

// reconcileNodeTaints applies TaintNodesByCondition's NoSchedule taints.
func (c *Controller) reconcileNodeTaints(ctx context.Context, name string) error {
	node, err := c.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get node %s: %w", name, err)
	}
	keys := noScheduleTaints(node)
	if _, changed := setNoSchedule(node.Spec.Taints, keys); !changed {
		return nil
	}
	// Recompute from the live node: its conditions may be newer.
	return c.updateTaints(ctx, name, func(n *corev1.Node) ([]corev1.Taint, bool) {
		return setNoSchedule(n.Spec.Taints, noScheduleTaints(n))
	})
}

// updateTaints rewrites the live node's taints with mutate, retrying on
// conflicts.
func (c *Controller) updateTaints(ctx context.Context, name string, mutate func(*corev1.Node) ([]corev1.Taint, bool)) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		taints, changed := mutate(node)
		if !changed {
			return nil
		}
		node.Spec.Taints = taints
		_, err = c.client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("update taints of node %s: %w", name, err)
	}
	return nil
}

// markPodsNotReady sets Ready=False on the pods of a node that is not
// ready, as upstream's MarkPodsNotReady, so Services stop sending them
// traffic even before they are evicted.
func (c *Controller) markPodsNotReady(ctx context.Context, node string) error {
	var errs []error
	for _, p := range c.podsOnNode(node) {
		i := podConditionIndex(p.Status.Conditions, corev1.PodReady)
		if i < 0 || p.Status.Conditions[i].Status != corev1.ConditionTrue {
			continue
		}
		pod := p.DeepCopy()
		cond := &pod.Status.Conditions[i]
		cond.Status, cond.LastTransitionTime = corev1.ConditionFalse, metav1.NewTime(c.clock.Now())
		if _, err := c.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			if !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("mark pod %s/%s not ready: %w", pod.Namespace, pod.Name, err))
			}
			continue
		}
		c.recorder.Eventf(pod, corev1.EventTypeWarning, ReasonNodeNotReady, "Node is not ready")
	}
	return errors.Join(errs...)
}

func podConditionIndex(conds []corev1.PodCondition, t corev1.PodConditionType) int {
	for i := range conds {
		if conds[i].Type == t {
			return i
		}
	}
	return -1
}

// recordNodeEvent records on a reference whose UID is the node name, as
// upstream does and kubectl describe node expects.
func (c *Controller) recordNodeEvent(node, eventType, reason, msg string) {
	ref := &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node, UID: types.UID(node)}
	c.recorder.Event(ref, eventType, reason, msg)
}
