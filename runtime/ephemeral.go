package runtime

import corev1 "k8s.io/api/core/v1"

// EphemeralContainer returns the pod's i-th ephemeral container as a
// container: the same fields, which is how upstream's kubelet runs it.
func EphemeralContainer(pod *corev1.Pod, i int) *corev1.Container {
	return (*corev1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
}

// EphemeralContainers returns all the pod's ephemeral containers as
// containers (nil without any).
func EphemeralContainers(pod *corev1.Pod) []corev1.Container {
	if len(pod.Spec.EphemeralContainers) == 0 {
		return nil
	}
	out := make([]corev1.Container, len(pod.Spec.EphemeralContainers))
	for i := range pod.Spec.EphemeralContainers {
		out[i] = *EphemeralContainer(pod, i)
	}
	return out
}
