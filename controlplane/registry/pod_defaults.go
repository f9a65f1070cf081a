package registry

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// Priorities of the built-in priority classes (upstream's
// scheduling.SystemCriticalPriority and friends).
const (
	systemClusterCriticalPriority = int32(2000000000)
	systemNodeCriticalPriority    = int32(2000001000)
)

// defaultPod gives a Pod, after upstream's v1 defaulters (see useUpstream),
// what upstream applies outside them: the v1 conversion's aliases
// (serviceAccount for serviceAccountName, podIP and podIPs) and the
// mutations of the admission plugins every cluster runs (ServiceAccount,
// Priority, DefaultTolerationSeconds). It is idempotent.
func defaultPod(pod *corev1.Pod, opts Options) {
	spec := &pod.Spec
	// serviceAccount is the deprecated alias of serviceAccountName; the v1
	// conversion prefers the new field and writes the old one back.
	if spec.ServiceAccountName == "" {
		spec.ServiceAccountName = spec.DeprecatedServiceAccount
	}
	spec.DeprecatedServiceAccount = spec.ServiceAccountName
	admitPod(spec, opts)
	syncPodStatusIPs(&pod.Status)
}

// admitPod applies the create-time mutations of upstream's admission plugins
// that do not need other objects: the service account defaults to "default"
// (ServiceAccount), the priority comes from the priority class (Priority; only
// the built-in classes are known here, anything else gets 0), and NoExecute
// tolerations for not-ready and unreachable nodes are added unless the pod
// already tolerates those taints (DefaultTolerationSeconds).
func admitPod(spec *corev1.PodSpec, opts Options) {
	if spec.ServiceAccountName == "" {
		spec.ServiceAccountName = "default"
		spec.DeprecatedServiceAccount = "default"
	}
	if spec.Priority == nil {
		var p int32
		switch spec.PriorityClassName {
		case "system-node-critical":
			p = systemNodeCriticalPriority
		case "system-cluster-critical":
			p = systemClusterCriticalPriority
		}
		spec.Priority = &p
	}
	if spec.PreemptionPolicy == nil {
		spec.PreemptionPolicy = ptr.To(corev1.PreemptLowerPriority)
	}
	addDefaultTolerations(spec, opts)
}

func addDefaultTolerations(spec *corev1.PodSpec, opts Options) {
	notReady, unreachable := false, false
	for _, t := range spec.Tolerations {
		if t.Effect != corev1.TaintEffectNoExecute && t.Effect != "" {
			continue
		}
		if t.Key == "" || t.Key == corev1.TaintNodeNotReady {
			notReady = true
		}
		if t.Key == "" || t.Key == corev1.TaintNodeUnreachable {
			unreachable = true
		}
	}
	if !notReady {
		spec.Tolerations = append(spec.Tolerations, corev1.Toleration{
			Key:               corev1.TaintNodeNotReady,
			Operator:          corev1.TolerationOpExists,
			Effect:            corev1.TaintEffectNoExecute,
			TolerationSeconds: ptr.To(opts.DefaultNotReadyTolerationSeconds),
		})
	}
	if !unreachable {
		spec.Tolerations = append(spec.Tolerations, corev1.Toleration{
			Key:               corev1.TaintNodeUnreachable,
			Operator:          corev1.TolerationOpExists,
			Effect:            corev1.TaintEffectNoExecute,
			TolerationSeconds: ptr.To(opts.DefaultUnreachableTolerationSeconds),
		})
	}
}

// syncPodStatusIPs keeps the singular and plural IP fields in step, as the v1
// conversion does: the plural wins, the singular is its first element.
func syncPodStatusIPs(s *corev1.PodStatus) {
	if len(s.PodIPs) == 0 && s.PodIP != "" {
		s.PodIPs = []corev1.PodIP{{IP: s.PodIP}}
	}
	if len(s.PodIPs) > 0 {
		s.PodIP = s.PodIPs[0].IP
	}
	if len(s.HostIPs) == 0 && s.HostIP != "" {
		s.HostIPs = []corev1.HostIP{{IP: s.HostIP}}
	}
	if len(s.HostIPs) > 0 {
		s.HostIP = s.HostIPs[0].IP
	}
}
