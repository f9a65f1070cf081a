package podresources

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	helpers "k8s.io/component-helpers/resource"
)

// Defaults upstream's scheduler scores a container that requests no cpu or
// memory with, so that "best effort" pods still spread.
const (
	DefaultMilliCPURequest int64 = 100
	DefaultMemoryRequest   int64 = 200 * 1024 * 1024
)

var nonZeroDefaults = corev1.ResourceList{
	corev1.ResourceCPU:    *resource.NewMilliQuantity(DefaultMilliCPURequest, resource.DecimalSI),
	corev1.ResourceMemory: *resource.NewQuantity(DefaultMemoryRequest, resource.BinarySI),
}

// Requests is what the pod asks a node for: its containers and sidecars
// (restartable init containers) summed, at least the peak of each ordinary
// init container beside the sidecars started before it, plus overhead.
func Requests(pod *corev1.Pod) corev1.ResourceList {
	return helpers.PodRequests(pod, helpers.PodResourcesOptions{})
}

// NonZeroRequests is Requests with upstream's scoring defaults for
// containers that do not set a cpu or memory request.
func NonZeroRequests(pod *corev1.Pod) corev1.ResourceList {
	return helpers.PodRequests(pod, helpers.PodResourcesOptions{NonMissingContainerRequests: nonZeroDefaults})
}

// Limits aggregates the pod's limits like Requests (overhead only where a
// limit is set). cpuDeclared and memoryDeclared report whether every
// container, init containers included, sets that limit: only then may the
// pod's cgroup be capped for it.
func Limits(pod *corev1.Pod) (limits corev1.ResourceList, cpuDeclared, memoryDeclared bool) {
	cpuDeclared, memoryDeclared = true, true
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Resources.Limits.Cpu().IsZero() {
				cpuDeclared = false
			}
			if list[i].Resources.Limits.Memory().IsZero() {
				memoryDeclared = false
			}
		}
	}
	return helpers.PodLimits(pod, helpers.PodResourcesOptions{}), cpuDeclared, memoryDeclared
}
