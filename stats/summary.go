package stats

// The Summary API's shape, from the published snapshot. CPU and memory
// are reported (what metrics-server and `kubectl top` read), and the pods'
// volumes; no other file system, network or I/O stats.

import (
	"cmp"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/runtime"
)

// Summary returns the node's and the pods' usage as of the last sample, in
// the shape of the kubelet's /stats/summary. Each call returns a new value
// the caller may keep or modify.
//
//   - Node: name; boot time as StartTime; CPU and memory of the whole
//     machine (see node.go). CPU and Memory are nil before the first
//     successful sample.
//   - Pods: every pod with a running sandbox or container, ordered by
//     namespace and name. Containers lists the app and init containers
//     (not sandboxes), ordered by name; if two instances of one name run,
//     the newer one. A pod's CPU and Memory sum all its running
//     containers and sandboxes; its StartTime is its sandbox's.
//   - UsageNanoCores is the CPU rate over the window between the last two
//     samples: nil until something was sampled twice (a new container's
//     first interval, the node's first). A pod's rate sums the rates its
//     members have, and is nil when none has one.
//   - A pod's VolumeStats are its volumes as last measured (see
//     Config.Volumes), in no particular order.
//   - Times are those of the samples (for containers, when containerd
//     read the cgroup).
func (c *Collector) Summary() *statsv1alpha1.Summary {
	return c.summaryOf(c.state.Load())
}

func (c *Collector) summaryOf(s *snapshot) *statsv1alpha1.Summary {
	return &statsv1alpha1.Summary{
		Node: nodeStats(c.cfg.NodeName, s.node, s.prevNode),
		Pods: podStats(s.containers, c.podVolumes()),
	}
}

func nodeStats(name string, cur, prev *nodeSample) statsv1alpha1.NodeStats {
	ns := statsv1alpha1.NodeStats{NodeName: name}
	if cur == nil {
		return ns
	}
	t := metav1.NewTime(cur.time)
	ns.StartTime = metav1.NewTime(cur.bootTime)
	ns.CPU = &statsv1alpha1.CPUStats{Time: t, UsageCoreNanoSeconds: ptr.To(cur.cpuNanos)}
	if prev != nil {
		ns.CPU.UsageNanoCores = rate(prev.cpuNanos, cur.cpuNanos, prev.time, cur.time)
	}
	ns.Memory = &statsv1alpha1.MemoryStats{
		Time:            t,
		AvailableBytes:  ptr.To(cur.memAvailable),
		UsageBytes:      ptr.To(cur.memoryUsage()),
		WorkingSetBytes: ptr.To(cur.workingSet()),
		RSSBytes:        ptr.To(cur.anon),
		PageFaults:      ptr.To(cur.pageFaults),
		MajorPageFaults: ptr.To(cur.majorPageFaults),
	}
	return ns
}

// pod gathers one pod's sandboxes and containers.
type pod struct {
	ref     statsv1alpha1.PodReference
	members []window          // sandboxes and containers: the pod's usage
	byName  map[string]window // the newest instance of each container
	start   time.Time         // the earliest sandbox start
	first   time.Time         // the earliest container start
}

func podStats(containers map[string]window, volumes map[types.UID][]statsv1alpha1.VolumeStats) []statsv1alpha1.PodStats {
	pods := map[types.UID]*pod{}
	for _, w := range containers {
		m := w.cur
		p := pods[m.PodUID]
		if p == nil {
			p = &pod{
				ref:    statsv1alpha1.PodReference{Name: m.PodName, Namespace: m.PodNamespace, UID: string(m.PodUID)},
				byName: map[string]window{},
			}
			pods[m.PodUID] = p
		}
		p.members = append(p.members, w)
		if m.Sandbox {
			p.start = earliest(p.start, m.StartedAt)
			continue
		}
		p.first = earliest(p.first, m.StartedAt)
		if o, ok := p.byName[m.Name]; !ok || m.StartedAt.After(o.cur.StartedAt) {
			p.byName[m.Name] = w
		}
	}
	out := make([]statsv1alpha1.PodStats, 0, len(pods))
	for uid, p := range pods {
		ps := p.stats()
		ps.VolumeStats = slices.Clone(volumes[uid])
		out = append(out, ps)
	}
	slices.SortFunc(out, func(a, b statsv1alpha1.PodStats) int {
		return cmp.Or(cmp.Compare(a.PodRef.Namespace, b.PodRef.Namespace),
			cmp.Compare(a.PodRef.Name, b.PodRef.Name), cmp.Compare(a.PodRef.UID, b.PodRef.UID))
	})
	return out
}

func (p *pod) stats() statsv1alpha1.PodStats {
	ps := statsv1alpha1.PodStats{
		PodRef:     p.ref,
		StartTime:  metav1.NewTime(cmp.Or(p.start, p.first)),
		Containers: make([]statsv1alpha1.ContainerStats, 0, len(p.byName)),
	}
	for _, w := range p.byName {
		ps.Containers = append(ps.Containers, containerStats(w))
	}
	slices.SortFunc(ps.Containers, func(a, b statsv1alpha1.ContainerStats) int { return cmp.Compare(a.Name, b.Name) })
	ps.CPU, ps.Memory = sumUsage(p.members)
	return ps
}

func containerStats(w window) statsv1alpha1.ContainerStats {
	m := w.cur
	return statsv1alpha1.ContainerStats{
		Name:      m.Name,
		StartTime: metav1.NewTime(m.StartedAt),
		CPU: &statsv1alpha1.CPUStats{
			Time:                 metav1.NewTime(m.Timestamp),
			UsageNanoCores:       w.cpuRate(),
			UsageCoreNanoSeconds: ptr.To(m.CPUUsageNanoseconds),
		},
		Memory: memoryStats(m.Timestamp, usageOf(m)),
	}
}

// sumUsage adds up the usage of a pod's members, stamped with the newest
// of their times.
func sumUsage(members []window) (*statsv1alpha1.CPUStats, *statsv1alpha1.MemoryStats) {
	var total usage
	var last time.Time
	var nanoCores *uint64
	for _, w := range members {
		if w.cur.Timestamp.After(last) {
			last = w.cur.Timestamp
		}
		total.add(usageOf(w.cur))
		if r := w.cpuRate(); r != nil {
			nanoCores = ptr.To(ptr.Deref(nanoCores, 0) + *r)
		}
	}
	cpu := &statsv1alpha1.CPUStats{Time: metav1.NewTime(last), UsageNanoCores: nanoCores, UsageCoreNanoSeconds: ptr.To(total.cpuNanos)}
	return cpu, memoryStats(last, total)
}

// usage is the usage part of a container's reading, or a sum of them.
type usage struct {
	cpuNanos, memory, workingSet, rss, pageFaults, majorPageFaults uint64
}

func usageOf(m runtime.ContainerMetrics) usage {
	return usage{m.CPUUsageNanoseconds, m.MemoryUsageBytes, m.WorkingSetBytes, m.RSSBytes, m.PageFaults, m.MajorPageFaults}
}

func (u *usage) add(v usage) {
	u.cpuNanos += v.cpuNanos
	u.memory += v.memory
	u.workingSet += v.workingSet
	u.rss += v.rss
	u.pageFaults += v.pageFaults
	u.majorPageFaults += v.majorPageFaults
}

// memoryStats reports a reading's (or a sum's) memory; AvailableBytes
// stays nil, as the collector does not know the containers' limits.
func memoryStats(t time.Time, u usage) *statsv1alpha1.MemoryStats {
	return &statsv1alpha1.MemoryStats{
		Time:            metav1.NewTime(t),
		UsageBytes:      ptr.To(u.memory),
		WorkingSetBytes: ptr.To(u.workingSet),
		RSSBytes:        ptr.To(u.rss),
		PageFaults:      ptr.To(u.pageFaults),
		MajorPageFaults: ptr.To(u.majorPageFaults),
	}
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}
