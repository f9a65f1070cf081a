// Package plugins holds the scheduler's filter and score functions. They
// are pure functions of a pod's precomputed state and one NodeInfo, safe to
// call from many goroutines at once; filters return the upstream-worded
// reasons a node does not fit (nil when it fits).
package plugins

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/controlplane/scheduler/framework"
)

// Upstream's reason strings (they appear in FailedScheduling messages).
const (
	ReasonUnschedulable        = "node(s) were unschedulable"
	ReasonNodeName             = "node(s) didn't match the requested node name"
	ReasonNotReady             = "node(s) were not ready"
	ReasonNetworkUnavailable   = "node(s) had network unavailable"
	ReasonNodeAffinity         = "node(s) didn't match Pod's node affinity/selector"
	ReasonNodePorts            = "node(s) didn't have free ports for the requested pod ports"
	ReasonTooManyPods          = "Too many pods"
	ReasonInsufficientCPU      = "Insufficient cpu"
	ReasonInsufficientMemory   = "Insufficient memory"
	ReasonInsufficientStorage  = "Insufficient ephemeral-storage"
	ReasonAffinity             = "node(s) didn't match pod affinity rules"
	ReasonAntiAffinity         = "node(s) didn't match pod anti-affinity rules"
	ReasonExistingAntiAffinity = "node(s) didn't satisfy existing pods anti-affinity rules"
	ReasonSpread               = "node(s) didn't match pod topology spread constraints"
	ReasonSpreadMissingLabel   = "node(s) didn't match pod topology spread constraints (missing required label)"
	ReasonNodeUnknown          = "node(s) not found"
)

// TaintNodeUnschedulable is the taint a cordoned node implicitly carries;
// pods tolerating it may still land on the node.
const TaintNodeUnschedulable = "node.kubernetes.io/unschedulable"

// one-element reason slices shared by every failing call (no allocation).
var (
	rUnschedulable   = []string{ReasonUnschedulable}
	rNodeName        = []string{ReasonNodeName}
	rNotReady        = []string{ReasonNotReady}
	rNetwork         = []string{ReasonNetworkUnavailable}
	rNodeAffinity    = []string{ReasonNodeAffinity}
	rNodePorts       = []string{ReasonNodePorts}
	rAffinity        = []string{ReasonAffinity}
	rAntiAffinity    = []string{ReasonAntiAffinity}
	rExistingAnti    = []string{ReasonExistingAntiAffinity}
	rSpread          = []string{ReasonSpread}
	rSpreadMissing   = []string{ReasonSpreadMissingLabel}
	unschedulableTnt = corev1.Taint{Key: TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}
)

// NodeUnschedulable rejects cordoned nodes unless the pod tolerates the
// unschedulable taint.
func NodeUnschedulable(pod *corev1.Pod, n *framework.NodeInfo) []string {
	if !n.Node.Spec.Unschedulable || tolerates(pod.Spec.Tolerations, &unschedulableTnt) {
		return nil
	}
	return rUnschedulable
}

// NodeName rejects every node but the one spec.nodeName names, if any.
func NodeName(pod *corev1.Pod, n *framework.NodeInfo) []string {
	if pod.Spec.NodeName == "" || pod.Spec.NodeName == n.Node.Name {
		return nil
	}
	return rNodeName
}

// NodeConditions rejects nodes whose Ready condition is not True or whose
// network is unavailable.
func NodeConditions(n *framework.NodeInfo) []string {
	switch {
	case n.NotReady:
		return rNotReady
	case n.NetworkUnavailable:
		return rNetwork
	}
	return nil
}

// TaintToleration rejects a node with a NoSchedule or NoExecute taint the
// pod does not tolerate, naming the first such taint as upstream does.
func TaintToleration(pod *corev1.Pod, n *framework.NodeInfo) []string {
	taints := n.Node.Spec.Taints
	for i := range taints {
		t := &taints[i]
		if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if !tolerates(pod.Spec.Tolerations, t) {
			return []string{fmt.Sprintf("node(s) had untolerated taint {%s: %s}", t.Key, t.Value)}
		}
	}
	return nil
}

func tolerates(tols []corev1.Toleration, t *corev1.Taint) bool {
	for i := range tols {
		if ToleratesTaint(&tols[i], t) {
			return true
		}
	}
	return false
}

// ToleratesTaint is upstream's matching: the effect must match unless the
// toleration's is empty; an empty key (with Exists) matches every key;
// Exists ignores the value, Equal (or no operator) compares it.
func ToleratesTaint(tol *corev1.Toleration, t *corev1.Taint) bool {
	if tol.Effect != "" && tol.Effect != t.Effect {
		return false
	}
	if tol.Key != "" && tol.Key != t.Key {
		return false
	}
	switch tol.Operator {
	case corev1.TolerationOpExists:
		return true
	case "", corev1.TolerationOpEqual:
		return tol.Value == t.Value
	}
	return false
}

// NodeAffinity applies spec.nodeSelector and the required node affinity.
func NodeAffinity(p *framework.PodInfo, n *framework.NodeInfo) []string {
	if p.NodeSelector.Match(n.Node.Name, n.Labels) {
		return nil
	}
	return rNodeAffinity
}

// NodePorts rejects a node where a requested host port is already used.
func NodePorts(p *framework.PodInfo, n *framework.NodeInfo) []string {
	for _, want := range p.Ports {
		for _, used := range n.UsedPorts {
			if want.Conflicts(used) {
				return rNodePorts
			}
		}
	}
	return nil
}

// NodeResourcesFit checks the pod count and the cpu, memory and
// ephemeral-storage requests against allocatable minus what the node's
// pods request; every shortage is a reason of its own, as upstream.
func NodeResourcesFit(p *framework.PodInfo, n *framework.NodeInfo) []string {
	var out []string
	if int64(len(n.Pods))+1 > n.Allocatable.AllowedPodNumber {
		out = append(out, ReasonTooManyPods)
	}
	r, a, u := p.Requests, n.Allocatable, n.Requested
	if r.MilliCPU > 0 && r.MilliCPU > a.MilliCPU-u.MilliCPU {
		out = append(out, ReasonInsufficientCPU)
	}
	if r.Memory > 0 && r.Memory > a.Memory-u.Memory {
		out = append(out, ReasonInsufficientMemory)
	}
	if r.EphemeralStorage > 0 && r.EphemeralStorage > a.EphemeralStorage-u.EphemeralStorage {
		out = append(out, ReasonInsufficientStorage)
	}
	return out
}
