package nodelifecycle

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition reasons and messages upstream writes for a silent kubelet.
const (
	reasonNodeStatusUnknown      = "NodeStatusUnknown"
	reasonNodeStatusNeverUpdated = "NodeStatusNeverUpdated"
	msgStoppedPosting            = "Kubelet stopped posting node status."
	msgNeverPosted               = "Kubelet never posted node status."
)

// kubeletConditions are the conditions the kubelet owns and the controller
// sets to Unknown when it goes silent. NetworkUnavailable is left alone: it
// belongs to the network plugin or route controller.
var kubeletConditions = []corev1.NodeConditionType{
	corev1.NodeReady, corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure,
}

// Taint templates (TimeAdded is set when applied).
var (
	unreachableNoExecute = corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}
	notReadyNoExecute    = corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute}
)

func findCondition(conds []corev1.NodeCondition, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// markStatusUnknown sets the kubelet's conditions to Unknown as upstream's
// tryUpdateNodeHealth does once the grace period has passed without a
// heartbeat: heartbeats are kept, transition times move to now, missing
// conditions are added as never posted. It reports whether status changed.
func markStatusUnknown(status *corev1.NodeStatus, created, now metav1.Time) bool {
	changed := false
	for _, t := range kubeletConditions {
		c := findCondition(status.Conditions, t)
		switch {
		case c == nil:
			status.Conditions = append(status.Conditions, corev1.NodeCondition{
				Type: t, Status: corev1.ConditionUnknown, Reason: reasonNodeStatusNeverUpdated, Message: msgNeverPosted,
				LastHeartbeatTime: created, LastTransitionTime: now,
			})
			changed = true
		case c.Status != corev1.ConditionUnknown:
			c.Status, c.Reason, c.Message, c.LastTransitionTime = corev1.ConditionUnknown, reasonNodeStatusUnknown, msgStoppedPosting, now
			changed = true
		}
	}
	return changed
}

// noExecuteAction is what the Ready condition asks of a node's NoExecute
// taints.
type noExecuteAction int

const (
	noExecuteNone   noExecuteAction = iota
	noExecuteAdd                    // add want (rate limited, per zone)
	noExecuteSwap                   // replace the other node-controller taint with want at once
	noExecuteRemove                 // remove both taints at once
)

// decideNoExecute mirrors upstream's processTaintBaseEviction: Ready=False
// wants not-ready, Ready=Unknown wants unreachable; a node already carrying
// the other of the two gets them swapped at once, a node with neither gets
// the taint through the rate limiter; Ready=True removes both.
func decideNoExecute(ready corev1.ConditionStatus, taints []corev1.Taint) (noExecuteAction, corev1.Taint) {
	hasUnreachable := hasTaint(taints, unreachableNoExecute)
	hasNotReady := hasTaint(taints, notReadyNoExecute)
	switch ready {
	case corev1.ConditionTrue:
		if hasUnreachable || hasNotReady {
			return noExecuteRemove, corev1.Taint{}
		}
	case corev1.ConditionFalse:
		switch {
		case hasUnreachable:
			return noExecuteSwap, notReadyNoExecute
		case !hasNotReady:
			return noExecuteAdd, notReadyNoExecute
		}
	case corev1.ConditionUnknown:
		switch {
		case hasNotReady:
			return noExecuteSwap, unreachableNoExecute
		case !hasUnreachable:
			return noExecuteAdd, unreachableNoExecute
		}
	}
	return noExecuteNone, corev1.Taint{}
}

func hasTaint(taints []corev1.Taint, t corev1.Taint) bool {
	for i := range taints {
		if taints[i].MatchTaint(&t) {
			return true
		}
	}
	return false
}

// setNoExecute returns taints with the node-controller NoExecute taints
// replaced by want (none if want.Key is empty), keeping an already present
// want with its TimeAdded. It reports whether anything changed.
func setNoExecute(taints []corev1.Taint, want corev1.Taint, now time.Time) ([]corev1.Taint, bool) {
	out := make([]corev1.Taint, 0, len(taints)+1)
	changed, have := false, false
	for _, t := range taints {
		switch {
		case want.Key != "" && t.MatchTaint(&want):
			have = true
			out = append(out, t)
		case t.MatchTaint(&unreachableNoExecute) || t.MatchTaint(&notReadyNoExecute):
			changed = true
		default:
			out = append(out, t)
		}
	}
	if want.Key != "" && !have {
		want.TimeAdded = &metav1.Time{Time: now}
		out = append(out, want)
		changed = true
	}
	return out, changed
}

// conditionTaintKeys are the NoSchedule taints TaintNodesByCondition owns.
var conditionTaintKeys = []string{
	corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable, corev1.TaintNodeMemoryPressure,
	corev1.TaintNodeDiskPressure, corev1.TaintNodePIDPressure, corev1.TaintNodeNetworkUnavailable,
	corev1.TaintNodeUnschedulable,
}

// noScheduleTaints is upstream's TaintNodesByCondition map: which NoSchedule
// taints a node's conditions and spec.unschedulable call for.
func noScheduleTaints(node *corev1.Node) []string {
	var keys []string
	for _, c := range node.Status.Conditions {
		var key string
		switch {
		case c.Type == corev1.NodeReady && c.Status == corev1.ConditionFalse:
			key = corev1.TaintNodeNotReady
		case c.Type == corev1.NodeReady && c.Status == corev1.ConditionUnknown:
			key = corev1.TaintNodeUnreachable
		case c.Status != corev1.ConditionTrue:
			continue
		case c.Type == corev1.NodeMemoryPressure:
			key = corev1.TaintNodeMemoryPressure
		case c.Type == corev1.NodeDiskPressure:
			key = corev1.TaintNodeDiskPressure
		case c.Type == corev1.NodePIDPressure:
			key = corev1.TaintNodePIDPressure
		case c.Type == corev1.NodeNetworkUnavailable:
			key = corev1.TaintNodeNetworkUnavailable
		}
		if key != "" {
			keys = append(keys, key)
		}
	}
	if node.Spec.Unschedulable {
		keys = append(keys, corev1.TaintNodeUnschedulable)
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// setNoSchedule returns taints with the condition NoSchedule taints made
// equal to keys, leaving every other taint (and existing wanted ones) as
// they are. It reports whether anything changed.
func setNoSchedule(taints []corev1.Taint, keys []string) ([]corev1.Taint, bool) {
	out := make([]corev1.Taint, 0, len(taints)+len(keys))
	have := map[string]bool{}
	changed := false
	for _, t := range taints {
		if t.Effect == corev1.TaintEffectNoSchedule && slices.Contains(conditionTaintKeys, t.Key) {
			if !slices.Contains(keys, t.Key) || have[t.Key] {
				changed = true
				continue
			}
			have[t.Key] = true
		}
		out = append(out, t)
	}
	for _, k := range keys {
		if !have[k] {
			out = append(out, corev1.Taint{Key: k, Effect: corev1.TaintEffectNoSchedule})
			changed = true
		}
	}
	return out, changed
}

// zoneState is a zone's health, as upstream computes it.
type zoneState int

const (
	zoneNormal zoneState = iota
	zonePartialDisruption
	zoneFullDisruption
)

// unhealthyZoneThreshold and largeClusterThreshold are upstream's defaults.
const (
	unhealthyZoneThreshold = 0.55
	largeClusterThreshold  = 50
)

// computeZoneState: a zone with no ready node is fully disrupted; one with
// more than two not-ready nodes making up at least 55% is partially
// disrupted.
func computeZoneState(ready []corev1.ConditionStatus) zoneState {
	readyN, notReady := 0, 0
	for _, s := range ready {
		if s == corev1.ConditionTrue {
			readyN++
		} else {
			notReady++
		}
	}
	switch {
	case readyN == 0 && notReady > 0:
		return zoneFullDisruption
	case notReady > 2 && float64(notReady)/float64(notReady+readyN) >= unhealthyZoneThreshold:
		return zonePartialDisruption
	default:
		return zoneNormal
	}
}

// taintRate is the zone's NoExecute tainting rate (nodes a second):
// normal and fully disrupted zones use the primary rate; a partially
// disrupted zone slows to the secondary rate in a large cluster and stops
// in a small one, since there it is more likely the control plane's view
// than the nodes that is broken.
func taintRate(state zoneState, clusterSize int, primary, secondary float64) float64 {
	if state == zonePartialDisruption {
		if clusterSize > largeClusterThreshold {
			return secondary
		}
		return 0
	}
	return primary
}

// zoneKey identifies a node's failure domain by region and zone labels.
func zoneKey(node *corev1.Node) string {
	return node.Labels[corev1.LabelTopologyRegion] + ":" + node.Labels[corev1.LabelTopologyZone]
}
