// Package framework holds the scheduler's data model: per-pod facts
// computed once (requests, ports, compiled selectors) and per-node
// aggregates (requested resources, used ports, pods by owner) that filter
// and score functions read without locks.
package framework

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/podresources"
)

// Defaults upstream uses for scoring containers that request nothing, so
// that "best effort" pods still spread instead of piling onto one node.
const (
	DefaultMilliCPURequest = podresources.DefaultMilliCPURequest
	DefaultMemoryRequest   = podresources.DefaultMemoryRequest
)

// Resource is an amount of the resources the scheduler accounts for.
type Resource struct {
	MilliCPU         int64
	Memory           int64
	EphemeralStorage int64
	// AllowedPodNumber is only meaningful for a node's allocatable.
	AllowedPodNumber int64
}

// Add adds r2 to r.
func (r *Resource) Add(r2 Resource) {
	r.MilliCPU += r2.MilliCPU
	r.Memory += r2.Memory
	r.EphemeralStorage += r2.EphemeralStorage
}

// Sub subtracts r2 from r.
func (r *Resource) Sub(r2 Resource) {
	r.MilliCPU -= r2.MilliCPU
	r.Memory -= r2.Memory
	r.EphemeralStorage -= r2.EphemeralStorage
}

// SetMax raises each amount of r to at least the one in r2.
func (r *Resource) SetMax(r2 Resource) {
	r.MilliCPU = max(r.MilliCPU, r2.MilliCPU)
	r.Memory = max(r.Memory, r2.Memory)
	r.EphemeralStorage = max(r.EphemeralStorage, r2.EphemeralStorage)
}

// ResourceFromList reads cpu, memory, ephemeral-storage and pods from rl.
func ResourceFromList(rl corev1.ResourceList) Resource {
	var r Resource
	for name, q := range rl {
		switch name {
		case corev1.ResourceCPU:
			r.MilliCPU = q.MilliValue()
		case corev1.ResourceMemory:
			r.Memory = q.Value()
		case corev1.ResourceEphemeralStorage:
			r.EphemeralStorage = q.Value()
		case corev1.ResourcePods:
			r.AllowedPodNumber = q.Value()
		}
	}
	return r
}

// PodRequests computes what a pod asks a node for, as upstream does: the
// sum of its containers plus restartable (sidecar) init containers, at
// least the peak of any regular init container running next to the
// sidecars started before it, plus the pod overhead. nonZero uses the
// scoring defaults for containers without cpu or memory requests.
func PodRequests(spec *corev1.PodSpec, useNonZero bool) Resource {
	pod := &corev1.Pod{Spec: *spec}
	if useNonZero {
		return ResourceFromList(podresources.NonZeroRequests(pod))
	}
	return ResourceFromList(podresources.Requests(pod))
}
