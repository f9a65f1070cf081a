package plugins

import (
	"math"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/controlplane/scheduler/framework"
)

// MaxNodeScore is the best score a score function gives a node.
const MaxNodeScore int64 = 100

// ZoneLabel is the well-known zone label spreading blends in.
const ZoneLabel = "topology.kubernetes.io/zone"

// LeastAllocated favours nodes with the most free cpu and memory after
// placing the pod (non-zero requests, cpu and memory weighted equally).
func LeastAllocated(p *framework.PodInfo, n *framework.NodeInfo) int64 {
	cpu := leastFree(n.NonZeroRequested.MilliCPU+p.NonZero.MilliCPU, n.Allocatable.MilliCPU)
	mem := leastFree(n.NonZeroRequested.Memory+p.NonZero.Memory, n.Allocatable.Memory)
	return (cpu + mem) / 2
}

func leastFree(requested, capacity int64) int64 {
	if capacity <= 0 || requested > capacity {
		return 0
	}
	return (capacity - requested) * MaxNodeScore / capacity
}

// BalancedAllocation favours nodes whose cpu and memory would be used in
// similar fractions: 100 * (1 - standard deviation of the fractions).
func BalancedAllocation(p *framework.PodInfo, n *framework.NodeInfo) int64 {
	cpu := fraction(n.Requested.MilliCPU+p.Requests.MilliCPU, n.Allocatable.MilliCPU)
	mem := fraction(n.Requested.Memory+p.Requests.Memory, n.Allocatable.Memory)
	std := math.Abs(cpu-mem) / 2
	return int64((1 - std) * float64(MaxNodeScore))
}

func fraction(requested, capacity int64) float64 {
	if capacity <= 0 {
		return 1
	}
	return min(float64(requested)/float64(capacity), 1)
}

// OwnerSpread is the raw same-owner spreading score: how many pods of the
// pod's controller already run on n (lower is better).
func OwnerSpread(p *framework.PodInfo, n *framework.NodeInfo) int64 {
	if p.OwnerUID == "" {
		return 0
	}
	return int64(n.OwnerCounts[p.OwnerUID])
}

// NormalizeOwnerSpread maps raw owner counts to 0..100, fewest best, and
// when nodes carry zone labels blends in the zone's count with weight 2/3
// as upstream's SelectorSpread did.
func NormalizeOwnerSpread(nodes []*framework.NodeInfo, scores []int64) {
	var maxNode int64
	// Zones are few: a slice beats a map here.
	var zones []zoneCount
	zoneOf := make([]int, len(nodes))
	for i, n := range nodes {
		maxNode = max(maxNode, scores[i])
		zoneOf[i] = -1
		if n.Zone != "" {
			zoneOf[i], zones = addZone(zones, n.Zone, scores[i])
		}
	}
	var maxZone int64
	for _, z := range zones {
		maxZone = max(maxZone, z.count)
	}
	for i := range nodes {
		f := float64(MaxNodeScore)
		if maxNode > 0 {
			f = float64(MaxNodeScore*(maxNode-scores[i])) / float64(maxNode)
		}
		if zi := zoneOf[i]; zi >= 0 {
			zs := float64(MaxNodeScore)
			if maxZone > 0 {
				zs = float64(MaxNodeScore*(maxZone-zones[zi].count)) / float64(maxZone)
			}
			f = f/3 + zs*2/3
		}
		scores[i] = int64(f)
	}
}

type zoneCount struct {
	zone  string
	count int64
}

func addZone(zones []zoneCount, z string, c int64) (int, []zoneCount) {
	for i := range zones {
		if zones[i].zone == z {
			zones[i].count += c
			return i, zones
		}
	}
	return len(zones), append(zones, zoneCount{z, c})
}

// PreferredNodeAffinity sums the weights of the preferred node affinity
// terms n matches.
func PreferredNodeAffinity(p *framework.PodInfo, n *framework.NodeInfo) int64 {
	var s int64
	for i := range p.PreferredAffinity {
		if p.PreferredAffinity[i].Term.Match(n.Node.Name, n.Labels) {
			s += int64(p.PreferredAffinity[i].Weight)
		}
	}
	return s
}

// PreferNoScheduleTaints counts n's PreferNoSchedule taints the pod does
// not tolerate (lower is better).
func PreferNoScheduleTaints(pod *corev1.Pod, n *framework.NodeInfo) int64 {
	var c int64
	for i := range n.Node.Spec.Taints {
		t := &n.Node.Spec.Taints[i]
		if t.Effect != corev1.TaintEffectPreferNoSchedule {
			continue
		}
		ok := false
		for j := range pod.Spec.Tolerations {
			tol := &pod.Spec.Tolerations[j]
			if (tol.Effect == "" || tol.Effect == corev1.TaintEffectPreferNoSchedule) && ToleratesTaint(tol, t) {
				ok = true
				break
			}
		}
		if !ok {
			c++
		}
	}
	return c
}

// NormalizeMax scales scores to 0..100 by the highest one; with reverse
// the lowest raw score becomes best. All zeros stay 0 (100 when reversed).
func NormalizeMax(scores []int64, reverse bool) {
	var hi int64
	for _, s := range scores {
		hi = max(hi, s)
	}
	for i, s := range scores {
		switch {
		case hi == 0 && reverse:
			scores[i] = MaxNodeScore
		case hi == 0:
			scores[i] = 0
		case reverse:
			scores[i] = MaxNodeScore - MaxNodeScore*s/hi
		default:
			scores[i] = MaxNodeScore * s / hi
		}
	}
}
