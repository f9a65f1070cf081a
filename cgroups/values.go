package cgroups

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/podresources"
)

// CPU constants as upstream (pkg/kubelet/cm/helpers_linux.go).
const (
	MinShares      = 2
	MaxShares      = 262144
	SharesPerCPU   = 1024
	MilliCPUToCPU  = 1000
	QuotaPeriod    = 100000 // µs, the CFS period the nodelet uses
	MinQuotaPeriod = 1000   // µs, the smallest quota the nodelet writes

	// ResourcePIDs is the resource name of process IDs in reserved and
	// allocatable lists (upstream's pidlimit.PIDs).
	ResourcePIDs corev1.ResourceName = "pid"
)

// Resources are the values of one cgroup, driver- and version-neutral. A nil
// field is left as it is.
type Resources struct {
	// CPUShares is cpu.shares on v1; v2 writes SharesToWeight(CPUShares)
	// to cpu.weight.
	CPUShares *uint64
	// CPUQuota is the CFS quota in µs per CPUPeriod; -1 means no limit.
	CPUQuota  *int64
	CPUPeriod *uint64
	// Memory is the memory limit in bytes; -1 means no limit.
	Memory *int64
	// PidsLimit is the maximum number of tasks; -1 means no limit.
	PidsLimit *int64
}

// MilliCPUToShares converts a CPU request to CFS shares: 1024 per CPU,
// at least MinShares (also for no request) and at most MaxShares.
func MilliCPUToShares(milliCPU int64) uint64 {
	if milliCPU == 0 {
		return MinShares
	}
	shares := (milliCPU * SharesPerCPU) / MilliCPUToCPU
	if shares < MinShares {
		return MinShares
	}
	if shares > MaxShares {
		return MaxShares
	}
	return uint64(shares)
}

// SharesToWeight converts v1 cpu.shares [2, 262144] to v2 cpu.weight
// [1, 10000] linearly, as the kubelet does; 0 (unset) stays 0.
func SharesToWeight(shares uint64) uint64 {
	if shares == 0 {
		return 0
	}
	shares = min(max(shares, MinShares), MaxShares)
	return 1 + ((shares-2)*9999)/262142
}

// MilliCPUToQuota converts a CPU limit to a CFS quota over period µs; 0
// (no limit) stays 0, anything else is at least MinQuotaPeriod.
func MilliCPUToQuota(milliCPU, period int64) int64 {
	if milliCPU == 0 {
		return 0
	}
	quota := (milliCPU * period) / MilliCPUToCPU
	return max(quota, MinQuotaPeriod)
}

// PodResources are the values of a pod's cgroup, as upstream's
// ResourceConfigForPod with CFS quota enforced: shares from the requests;
// quota and memory limit for Guaranteed pods, and for Burstable pods when
// every container sets that limit; BestEffort gets MinShares only.
// pidsLimit > 0 caps the pod's tasks.
func PodResources(pod *corev1.Pod, pidsLimit int64) Resources {
	reqs := podresources.Requests(pod)
	limits, cpuDeclared, memDeclared := podresources.Limits(pod)
	shares := MilliCPUToShares(milli(reqs, corev1.ResourceCPU))
	quota := MilliCPUToQuota(milli(limits, corev1.ResourceCPU), QuotaPeriod)
	period := uint64(QuotaPeriod)
	mem := value(limits, corev1.ResourceMemory)

	var r Resources
	switch podresources.QOSClass(pod) {
	case corev1.PodQOSGuaranteed:
		r = Resources{CPUShares: &shares, CPUQuota: &quota, CPUPeriod: &period, Memory: &mem}
	case corev1.PodQOSBurstable:
		r.CPUShares = &shares
		if cpuDeclared {
			r.CPUQuota, r.CPUPeriod = &quota, &period
		}
		if memDeclared {
			r.Memory = &mem
		}
	default:
		minShares := uint64(MinShares)
		r.CPUShares = &minShares
	}
	if pidsLimit > 0 {
		r.PidsLimit = &pidsLimit
	}
	return r
}

// TierResources are the values of the burstable and besteffort cgroups
// given the pods on the node: besteffort always MinShares; burstable the
// shares of the summed CPU requests of the Burstable pods (MinShares when
// there are none).
func TierResources(pods []*corev1.Pod) (burstable, besteffort Resources) {
	var milliCPU int64
	for _, pod := range pods {
		if podresources.QOSClass(pod) != corev1.PodQOSBurstable {
			continue
		}
		milliCPU += milli(podresources.Requests(pod), corev1.ResourceCPU)
	}
	bShares, beShares := MilliCPUToShares(milliCPU), uint64(MinShares)
	return Resources{CPUShares: &bShares}, Resources{CPUShares: &beShares}
}

// KubepodsResources are the values of the kubepods cgroup for the node's
// allocatable resources (nil: no limits): cpu shares from allocatable cpu,
// memory limit from allocatable memory, pids limit from allocatable
// ResourcePIDs.
func KubepodsResources(allocatable corev1.ResourceList) Resources {
	var r Resources
	if q, ok := allocatable[corev1.ResourceCPU]; ok {
		shares := MilliCPUToShares(q.MilliValue())
		r.CPUShares = &shares
	}
	if q, ok := allocatable[corev1.ResourceMemory]; ok {
		mem := q.Value()
		r.Memory = &mem
	}
	if q, ok := allocatable[ResourcePIDs]; ok {
		pids := q.Value()
		r.PidsLimit = &pids
	}
	return r
}

// ContainerValues are the per-container values the OCI spec builder writes
// (linux.resources and process.oomScoreAdj).
type ContainerValues struct {
	CPUShares   uint64
	CPUQuota    int64 // 0: no quota
	CPUPeriod   uint64
	MemoryLimit int64 // 0: no limit
	// OOMScoreAdj is upstream's value (see OOMScoreAdj); pass it through
	// ClampOOMScoreAdj where scores cannot be lowered.
	OOMScoreAdj int
}

// ContainerResources computes container c's values as upstream's
// generateLinuxContainerResources: shares from the CPU request (or from the
// limit when only a limit is set), quota from the CPU limit, the memory
// limit, and the OOM score for a node of memoryCapacity bytes.
func ContainerResources(pod *corev1.Pod, c *corev1.Container, memoryCapacity int64) ContainerValues {
	cpuReq := c.Resources.Requests.Cpu().MilliValue()
	cpuLim := c.Resources.Limits.Cpu().MilliValue()
	if cpuReq == 0 && cpuLim != 0 {
		cpuReq = cpuLim
	}
	return ContainerValues{
		CPUShares:   MilliCPUToShares(cpuReq),
		CPUQuota:    MilliCPUToQuota(cpuLim, QuotaPeriod),
		CPUPeriod:   QuotaPeriod,
		MemoryLimit: c.Resources.Limits.Memory().Value(),
		OOMScoreAdj: OOMScoreAdj(pod, c, memoryCapacity),
	}
}

func milli(list corev1.ResourceList, name corev1.ResourceName) int64 {
	if q, ok := list[name]; ok {
		return q.MilliValue()
	}
	return 0
}

func value(list corev1.ResourceList, name corev1.ResourceName) int64 {
	if q, ok := list[name]; ok {
		return q.Value()
	}
	return 0
}
