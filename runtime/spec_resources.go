package runtime

import (
	corev1 "k8s.io/api/core/v1"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/nodelet/nodelet/cgroups"
)

// Values of upstream's pause container, as containerd gives them.
const (
	// SandboxCPUShares is what containerd gives every pause container.
	SandboxCPUShares = 2
	// SandboxOOMScoreAdj is upstream's score for the pause container.
	SandboxOOMScoreAdj = cgroups.PodInfraOOMScoreAdj
)

// ContainerResources returns the Linux resources of container c of pod as
// the kubelet computes them (package cgroups holds the arithmetic): cpu
// shares from the request (or the limit when only a limit is set), CFS
// quota and period from the cpu limit, memory limit from the memory limit.
// Devices are left to the caller.
func ContainerResources(pod *corev1.Pod, c *corev1.Container) *specs.LinuxResources {
	v := cgroups.ContainerResources(pod, c, 0)
	res := &specs.LinuxResources{CPU: &specs.LinuxCPU{Shares: u64(v.CPUShares)}}
	if v.CPUQuota > 0 {
		res.CPU.Quota = i64(v.CPUQuota)
		res.CPU.Period = u64(v.CPUPeriod)
	}
	if v.MemoryLimit > 0 {
		res.Memory = &specs.LinuxMemory{Limit: i64(v.MemoryLimit)}
	}
	return res
}

// ContainerOOMScoreAdj is upstream's GetContainerOOMScoreAdjust for a node
// with memoryCapacity bytes (see cgroups.OOMScoreAdj).
func ContainerOOMScoreAdj(pod *corev1.Pod, c *corev1.Container, memoryCapacity int64) int {
	return cgroups.OOMScoreAdj(pod, c, memoryCapacity)
}
