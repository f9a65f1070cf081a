package registry

import (
	corev1 "k8s.io/api/core/v1"
)

// defaultPod gives a Pod, after upstream's v1 defaulters (see useUpstream),
// what upstream's v1 conversion applies outside them: the aliases
// (serviceAccount for serviceAccountName, podIP and podIPs). The default
// account, priority and tolerations are the admission plugins'
// (admissionplugins). It is idempotent.
func defaultPod(pod *corev1.Pod) {
	spec := &pod.Spec
	// serviceAccount is the deprecated alias of serviceAccountName; the v1
	// conversion prefers the new field and writes the old one back.
	if spec.ServiceAccountName == "" {
		spec.ServiceAccountName = spec.DeprecatedServiceAccount
	}
	spec.DeprecatedServiceAccount = spec.ServiceAccountName
	syncPodStatusIPs(&pod.Status)
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
