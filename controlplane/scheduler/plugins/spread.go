package plugins

import (
	"math"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/nodelet/nodelet/controlplane/scheduler/framework"
)

// SpreadState holds, per topologySpreadConstraint of one kind (hard or
// soft), how many matching pods each topology domain holds, counted over
// the nodes the constraint's inclusion policies admit.
type SpreadState struct {
	constraints []framework.SpreadConstraint
	counts      []map[string]int32
	// min is the smallest domain count per constraint (0 when there are
	// fewer domains than minDomains, as upstream).
	min []int32
	// weight is upstream's log(domains+2) normalizing weight (soft only).
	weight []float64
}

// PreFilterSpread counts matching pods per domain for the hard (hard=true)
// or soft constraints of p; nil when p has none of that kind.
func PreFilterSpread(p *framework.PodInfo, nodes []*framework.NodeInfo, hard bool) *SpreadState {
	var cs []framework.SpreadConstraint
	for _, c := range p.SpreadConstraints {
		if c.Hard == hard {
			cs = append(cs, c)
		}
	}
	if len(cs) == 0 {
		return nil
	}
	s := &SpreadState{constraints: cs, counts: make([]map[string]int32, len(cs)), min: make([]int32, len(cs)), weight: make([]float64, len(cs))}
	for i := range s.counts {
		s.counts[i] = map[string]int32{}
	}
	for _, n := range nodes {
		if n.Node == nil || !hasAllKeys(n.Labels, cs) {
			continue
		}
		for i := range cs {
			c := &cs[i]
			if !spreadIncludes(c, p, n) {
				continue
			}
			s.counts[i][n.Labels[c.TopologyKey]] += countMatching(c.Selector, p.Pod.Namespace, n)
		}
	}
	for i := range cs {
		s.min[i] = minCount(s.counts[i], cs[i].MinDomains)
		s.weight[i] = math.Log(float64(len(s.counts[i]) + 2))
	}
	return s
}

func hasAllKeys(l labels.Set, cs []framework.SpreadConstraint) bool {
	for i := range cs {
		if _, ok := l[cs[i].TopologyKey]; !ok {
			return false
		}
	}
	return true
}

// spreadIncludes applies nodeAffinityPolicy and nodeTaintsPolicy.
func spreadIncludes(c *framework.SpreadConstraint, p *framework.PodInfo, n *framework.NodeInfo) bool {
	if c.HonorNodeAffinity && !p.NodeSelector.Match(n.Node.Name, n.Labels) {
		return false
	}
	return !c.HonorNodeTaints || TaintToleration(p.Pod, n) == nil
}

func countMatching(sel labels.Selector, ns string, n *framework.NodeInfo) int32 {
	var c int32
	for _, e := range n.Pods {
		if e.Pod.Namespace == ns && e.Pod.DeletionTimestamp == nil && sel.Matches(labels.Set(e.Pod.Labels)) {
			c++
		}
	}
	return c
}

func minCount(counts map[string]int32, minDomains int32) int32 {
	if int32(len(counts)) < minDomains || len(counts) == 0 {
		return 0
	}
	m := int32(math.MaxInt32)
	for _, v := range counts {
		m = min(m, v)
	}
	return m
}

// PodTopologySpread is the DoNotSchedule filter: placing the pod on n must
// not make any constraint's skew exceed maxSkew. s may be nil.
func PodTopologySpread(p *framework.PodInfo, s *SpreadState, n *framework.NodeInfo) []string {
	if s == nil {
		return nil
	}
	for i := range s.constraints {
		c := &s.constraints[i]
		v, ok := n.Labels[c.TopologyKey]
		if !ok {
			return rSpreadMissing
		}
		self := int32(0)
		if c.SelfMatch {
			self = 1
		}
		if int64(s.counts[i][v])+int64(self)-int64(s.min[i]) > int64(c.MaxSkew) {
			return rSpread
		}
	}
	return nil
}

// SpreadScore is the raw ScheduleAnyway score (lower is better): the
// weighted matching-pod counts of n's domains. -1 marks a node without
// the constraints' topology keys (it then scores 0).
func SpreadScore(s *SpreadState, n *framework.NodeInfo) int64 {
	var score float64
	for i := range s.constraints {
		c := &s.constraints[i]
		v, ok := n.Labels[c.TopologyKey]
		if !ok {
			return -1
		}
		score += float64(s.counts[i][v])*s.weight[i] + float64(c.MaxSkew-1)
	}
	return int64(math.Round(score))
}

// NormalizeSpread maps raw spread scores to 0..100, fewest pods best.
func NormalizeSpread(scores []int64) {
	lo, hi := int64(math.MaxInt64), int64(0)
	for _, s := range scores {
		if s < 0 {
			continue
		}
		lo, hi = min(lo, s), max(hi, s)
	}
	for i, s := range scores {
		switch {
		case s < 0:
			scores[i] = 0
		case hi == 0:
			scores[i] = MaxNodeScore
		default:
			scores[i] = MaxNodeScore * (hi + lo - s) / hi
		}
	}
}
