package podgc

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reason says why a pod is collected; the values are upstream's metric
// labels.
type Reason string

// Reasons, in the order upstream's pass considers them.
const (
	ReasonTerminated   Reason = "terminated"     // over the terminated-pod threshold
	ReasonOutOfService Reason = "out-of-service" // terminating on a NotReady, out-of-service node
	ReasonOrphaned     Reason = "orphaned"       // bound to a node that is gone
	ReasonUnscheduled  Reason = "unscheduled"    // terminating and never bound
)

// Upstream's DisruptionTarget condition for orphaned pods.
const (
	conditionReason  = "DeletionByPodGC"
	conditionMessage = "PodGC: node no longer exists"
	evictedReason    = "Evicted" // the kubelet's status.reason for evicted pods
)

// Input is everything a pass decides from.
type Input struct {
	Pods []*corev1.Pod
	// Nodes are the nodes in the informer, by name.
	Nodes map[string]*corev1.Node
	// Gone are the nodes confirmed absent after quarantine (see
	// quarantine): missing from the informer and NotFound on a GET.
	Gone map[string]bool
	// Threshold is how many terminated pods may stay; <= 0 disables
	// collecting them.
	Threshold int
	Now       time.Time
}

// Action is one pod to force-delete (grace 0). If MarkFailed, the pod's
// status first gets phase Failed and, when set, Condition.
type Action struct {
	Pod        *corev1.Pod
	Reason     Reason
	MarkFailed bool
	Condition  *corev1.PodCondition
}

// Plan decides which pods to collect and why, as upstream's gc pass:
// terminated pods over the threshold (evicted first, then oldest),
// terminating pods on NotReady out-of-service nodes, pods bound to gone
// nodes, and terminating pods never bound. Each pod appears once, under
// the first reason in that order.
func Plan(in Input) []Action {
	var out []Action
	taken := map[*corev1.Pod]bool{}
	add := func(p *corev1.Pod, r Reason, cond *corev1.PodCondition) {
		if taken[p] {
			return
		}
		taken[p] = true
		out = append(out, Action{Pod: p, Reason: r, MarkFailed: !terminated(p), Condition: cond})
	}
	for _, p := range excessTerminated(in.Pods, in.Threshold) {
		add(p, ReasonTerminated, nil)
	}
	for _, p := range in.Pods {
		if p.DeletionTimestamp != nil && outOfService(in.Nodes[p.Spec.NodeName]) {
			add(p, ReasonOutOfService, nil)
		}
	}
	for _, p := range in.Pods {
		if p.Spec.NodeName != "" && in.Gone[p.Spec.NodeName] && in.Nodes[p.Spec.NodeName] == nil {
			add(p, ReasonOrphaned, orphanCondition(p, in.Now))
		}
	}
	for _, p := range in.Pods {
		if p.DeletionTimestamp != nil && p.Spec.NodeName == "" {
			add(p, ReasonUnscheduled, nil)
		}
	}
	return out
}

// terminated is Succeeded or Failed. (Upstream counts any phase but
// Pending, Running and Unknown; the API server gives every pod a phase.)
func terminated(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// excessTerminated returns the terminated pods beyond threshold, evicted
// pods first, then oldest first, names breaking ties.
func excessTerminated(pods []*corev1.Pod, threshold int) []*corev1.Pod {
	if threshold <= 0 {
		return nil
	}
	var done []*corev1.Pod
	for _, p := range pods {
		if terminated(p) {
			done = append(done, p)
		}
	}
	if len(done) <= threshold {
		return nil
	}
	slices.SortFunc(done, func(a, b *corev1.Pod) int {
		if ea, eb := evicted(a), evicted(b); ea != eb {
			if ea {
				return -1
			}
			return 1
		}
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return done[:len(done)-threshold]
}

func evicted(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodFailed && p.Status.Reason == evictedReason
}

// outOfService: the node exists, is not Ready and carries the
// out-of-service taint (any effect).
func outOfService(n *corev1.Node) bool {
	if n == nil || ready(n) {
		return false
	}
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeOutOfService })
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// orphanCondition is upstream's DisruptionTarget condition for a pod whose
// node is gone; an existing True condition keeps its transition time.
func orphanCondition(p *corev1.Pod, now time.Time) *corev1.PodCondition {
	c := &corev1.PodCondition{
		Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		ObservedGeneration: p.Generation, Reason: conditionReason, Message: conditionMessage,
		LastTransitionTime: metav1.NewTime(now),
	}
	for _, old := range p.Status.Conditions {
		if old.Type == corev1.DisruptionTarget && old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
	}
	return c
}
