package podresources

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// QOSClass computes a pod's quality-of-service class from its containers'
// requests and limits, exactly as upstream's ComputePodQOS does (only cpu and
// memory count; init containers count like app containers):
//   - BestEffort: no container requests or limits cpu or memory;
//   - Guaranteed: every container limits both cpu and memory, and the summed
//     requests equal the summed limits for each;
//   - Burstable: anything else.
//
// It ignores pod.Status.QOSClass; the API server stores the result there on
// create and the nodelet recomputes it the same way.
func QOSClass(pod *corev1.Pod) corev1.PodQOSClass {
	requests := corev1.ResourceList{}
	limits := corev1.ResourceList{}
	guaranteed := true
	all := make([]corev1.Container, 0, len(pod.Spec.Containers)+len(pod.Spec.InitContainers))
	all = append(all, pod.Spec.Containers...)
	all = append(all, pod.Spec.InitContainers...)
	for _, c := range all {
		addQOSQuantities(requests, c.Resources.Requests)
		found := addQOSQuantities(limits, c.Resources.Limits)
		if !found[corev1.ResourceCPU] || !found[corev1.ResourceMemory] {
			guaranteed = false
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return corev1.PodQOSBestEffort
	}
	if guaranteed {
		for name, req := range requests {
			if lim, ok := limits[name]; !ok || lim.Cmp(req) != 0 {
				guaranteed = false
				break
			}
		}
	}
	if guaranteed && len(requests) == len(limits) {
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}

// addQOSQuantities adds the positive cpu and memory quantities of list to sum
// and reports which of the two it found.
func addQOSQuantities(sum, list corev1.ResourceList) map[corev1.ResourceName]bool {
	found := map[corev1.ResourceName]bool{}
	var zero resource.Quantity
	for name, q := range list {
		if name != corev1.ResourceCPU && name != corev1.ResourceMemory {
			continue
		}
		if q.Cmp(zero) <= 0 {
			continue
		}
		found[name] = true
		total := q.DeepCopy()
		if prev, ok := sum[name]; ok {
			total.Add(prev)
		}
		sum[name] = total
	}
	return found
}
