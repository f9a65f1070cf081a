package cgroups

import (
	corev1 "k8s.io/api/core/v1"
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

// PodRequests sums the pod's requests as the scheduler and kubelet do: app
// containers and sidecars (restartable init containers) add up, each
// ordinary init container needs its own request plus the sidecars started
// before it, the pod needs the larger of the two, plus spec.overhead.
func PodRequests(pod *corev1.Pod) corev1.ResourceList {
	reqs := aggregate(pod, func(c *corev1.Container) corev1.ResourceList { return c.Resources.Requests })
	addResources(reqs, pod.Spec.Overhead)
	return reqs
}

// PodLimits aggregates limits like PodRequests; overhead is added only to
// resources that have a limit. cpuDeclared and memoryDeclared report whether
// every container (init containers included) sets that limit.
func PodLimits(pod *corev1.Pod) (limits corev1.ResourceList, cpuDeclared, memoryDeclared bool) {
	cpuDeclared, memoryDeclared = true, true
	limits = aggregate(pod, func(c *corev1.Container) corev1.ResourceList {
		if c.Resources.Limits.Cpu().IsZero() {
			cpuDeclared = false
		}
		if c.Resources.Limits.Memory().IsZero() {
			memoryDeclared = false
		}
		return c.Resources.Limits
	})
	for name, q := range pod.Spec.Overhead {
		if v, ok := limits[name]; ok {
			v.Add(q)
			limits[name] = v
		}
	}
	return limits, cpuDeclared, memoryDeclared
}

func aggregate(pod *corev1.Pod, get func(*corev1.Container) corev1.ResourceList) corev1.ResourceList {
	sum := corev1.ResourceList{}
	for i := range pod.Spec.Containers {
		addResources(sum, get(&pod.Spec.Containers[i]))
	}
	sidecars := corev1.ResourceList{}
	initMax := corev1.ResourceList{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		need := corev1.ResourceList{}
		if isRestartable(c) {
			addResources(sum, get(c))
			addResources(sidecars, get(c))
			addResources(need, sidecars)
		} else {
			addResources(need, get(c))
			addResources(need, sidecars)
		}
		maxResources(initMax, need)
	}
	maxResources(sum, initMax)
	return sum
}

func addResources(sum, list corev1.ResourceList) {
	for name, q := range list {
		v := sum[name]
		v.Add(q)
		sum[name] = v
	}
}

func maxResources(dst, list corev1.ResourceList) {
	for name, q := range list {
		if v, ok := dst[name]; !ok || q.Cmp(v) > 0 {
			dst[name] = q.DeepCopy()
		}
	}
}

// PodResources are the values of a pod's cgroup, as upstream's
// ResourceConfigForPod with CFS quota enforced: shares from the requests;
// quota and memory limit for Guaranteed pods, and for Burstable pods when
// every container sets that limit; BestEffort gets MinShares only.
// pidsLimit > 0 caps the pod's tasks.
func PodResources(pod *corev1.Pod, pidsLimit int64) Resources {
	reqs := PodRequests(pod)
	limits, cpuDeclared, memDeclared := PodLimits(pod)
	shares := MilliCPUToShares(milli(reqs, corev1.ResourceCPU))
	quota := MilliCPUToQuota(milli(limits, corev1.ResourceCPU), QuotaPeriod)
	period := uint64(QuotaPeriod)
	mem := value(limits, corev1.ResourceMemory)

	var r Resources
	switch QOSClass(pod) {
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
		if QOSClass(pod) != corev1.PodQOSBurstable {
			continue
		}
		milliCPU += milli(PodRequests(pod), corev1.ResourceCPU)
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
