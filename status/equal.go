package status

import (
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// Equal reports whether two statuses differ in nothing the node would
// write, as upstream's isPodStatusByKubeletEqual: the node's conditions
// compare by status, reason and message only (not their times), other
// conditions are ignored, and everything else compares semantically with
// timestamps at second precision.
func Equal(a, b corev1.PodStatus) bool {
	ca, cb := ownedConditions(a.Conditions), ownedConditions(b.Conditions)
	if len(ca) != len(cb) {
		return false
	}
	for t, x := range ca {
		y, ok := cb[t]
		if !ok || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message {
			return false
		}
	}
	x, y := a.DeepCopy(), b.DeepCopy()
	x.Conditions, y.Conditions = nil, nil
	normalize(x)
	normalize(y)
	return apiequality.Semantic.DeepEqual(x, y)
}

func ownedConditions(conds []corev1.PodCondition) map[corev1.PodConditionType]corev1.PodCondition {
	out := map[corev1.PodConditionType]corev1.PodCondition{}
	for _, c := range conds {
		if ownedByNodelet(c.Type) || c.Type == corev1.DisruptionTarget {
			out[c.Type] = c
		}
	}
	return out
}
