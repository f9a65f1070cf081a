package nodelifecycle

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// evictionTime decides when a pod on a node with the given taints must go,
// as upstream's taint-based eviction: only NoExecute taints count; a taint
// the pod does not tolerate evicts it at once; otherwise each taint is
// tolerated for the tolerationSeconds of the first toleration matching it
// (none: forever; zero or less: not at all), counted from the taint's
// timeAdded (added(taint) supplies a time for taints without one). The pod
// goes at the earliest such deadline. evict is false when no taint limits
// the pod; at is zero when it must go now.
//
// Upstream counts from when its taint manager noticed the taint; counting
// from timeAdded gives the same answer without state and across restarts.
func evictionTime(tolerations []corev1.Toleration, taints []corev1.Taint, added func(corev1.Taint) time.Time) (at time.Time, evict bool) {
	for i := range taints {
		t := &taints[i]
		if t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		tol := firstTolerating(tolerations, t)
		if tol == nil {
			return time.Time{}, true
		}
		if tol.TolerationSeconds == nil {
			continue
		}
		secs := max(*tol.TolerationSeconds, 0)
		deadline := added(*t).Add(time.Duration(secs) * time.Second)
		if !evict || deadline.Before(at) {
			at, evict = deadline, true
		}
	}
	return at, evict
}

func firstTolerating(tolerations []corev1.Toleration, t *corev1.Taint) *corev1.Toleration {
	for i := range tolerations {
		if tolerations[i].ToleratesTaint(klog.Background(), t, false) {
			return &tolerations[i]
		}
	}
	return nil
}

// noExecuteTaints returns the node's NoExecute taints.
func noExecuteTaints(node *corev1.Node) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range node.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoExecute {
			out = append(out, t)
		}
	}
	return out
}
