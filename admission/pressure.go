package admission

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/podresources"
)

// reasonEvicted is the reason of pods refused under node pressure, as
// upstream's eviction manager gives them.
const reasonEvicted = "Evicted"

// NodePressure refuses new pods while the node is under resource
// pressure, as upstream's eviction manager admit handler: with no
// pressure every pod is admitted; critical pods (critical(pod)) always
// are; under memory pressure alone only BestEffort pods are refused,
// unless they tolerate the node.kubernetes.io/memory-pressure taint; under
// disk or PID pressure every other pod is. conditions reads the node's
// pressure conditions at each decision.
func NodePressure(conditions func() []corev1.NodeConditionType, critical func(*corev1.Pod) bool) Handler {
	return HandlerFunc(func(a Attributes) Result {
		conds := conditions()
		if len(conds) == 0 || critical(a.Pod) {
			return Admitted
		}
		if len(conds) == 1 && conds[0] == corev1.NodeMemoryPressure {
			if podresources.QOSClass(a.Pod) != corev1.PodQOSBestEffort {
				return Admitted
			}
			taint := corev1.Taint{Key: corev1.TaintNodeMemoryPressure, Effect: corev1.TaintEffectNoSchedule}
			if slices.ContainsFunc(a.Pod.Spec.Tolerations, func(t corev1.Toleration) bool { return tolerates(t, taint) }) {
				return Admitted
			}
		}
		return Result{Reason: reasonEvicted, Message: fmt.Sprintf("The node had condition: %v. ", conds)}
	})
}

// tolerates is the API's toleration matching (Exists, Equal; an empty key
// with Exists matches every key, an empty effect every effect).
func tolerates(t corev1.Toleration, taint corev1.Taint) bool {
	if t.Effect != "" && t.Effect != taint.Effect {
		return false
	}
	if t.Key != "" && t.Key != taint.Key {
		return false
	}
	switch t.Operator {
	case corev1.TolerationOpExists:
		return true
	case "", corev1.TolerationOpEqual:
		return t.Key != "" && t.Value == taint.Value
	}
	return false
}
