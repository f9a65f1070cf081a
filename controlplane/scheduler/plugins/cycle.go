package plugins

import (
	"github.com/nodelet/nodelet/controlplane/scheduler/framework"
)

// Score plugin names, the keys of the weights map.
const (
	LeastAllocatedName        = "NodeResourcesLeastAllocated"
	BalancedAllocationName    = "NodeResourcesBalancedAllocation"
	SelectorSpreadName        = "SelectorSpread"
	PodTopologySpreadName     = "PodTopologySpread"
	NodeAffinityName          = "NodeAffinity"
	TaintTolerationName       = "TaintToleration"
	numScorers                = 6
	scoreLeast, scoreBalanced = 0, 1
	scoreOwner, scoreSpread   = 2, 3
	scoreAffinity, scoreTaint = 4, 5
)

// DefaultWeights are upstream's default-profile score weights.
func DefaultWeights() map[string]int32 {
	return map[string]int32{
		LeastAllocatedName: 1, BalancedAllocationName: 1, SelectorSpreadName: 1,
		PodTopologySpreadName: 2, NodeAffinityName: 2, TaintTolerationName: 3,
	}
}

// Weights are compiled score weights, indexed like the scorers.
type Weights [numScorers]int64

// CompileWeights fills missing names from DefaultWeights; a weight of 0
// disables the score.
func CompileWeights(m map[string]int32) Weights {
	d := DefaultWeights()
	for k, v := range m {
		d[k] = v
	}
	return Weights{
		int64(d[LeastAllocatedName]), int64(d[BalancedAllocationName]), int64(d[SelectorSpreadName]),
		int64(d[PodTopologySpreadName]), int64(d[NodeAffinityName]), int64(d[TaintTolerationName]),
	}
}

// State is one scheduling cycle's view of the pod: its PodInfo and what
// the filters precompute over all nodes.
type State struct {
	Pod        *framework.PodInfo
	InterPod   *InterPodState
	HardSpread *SpreadState
	SoftSpread *SpreadState
	// Volumes is the pod's claims as the cycle found them (nil: the pod
	// has none).
	Volumes *VolumeState
}

// PreFilter builds the cycle state of p over all nodes of the snapshot;
// existingAnti says whether any existing pod has required anti-affinity.
func PreFilter(p *framework.PodInfo, nodes []*framework.NodeInfo, existingAnti bool) *State {
	s := &State{Pod: p}
	if existingAnti || len(p.RequiredAffinity) > 0 || len(p.RequiredAntiAffinity) > 0 {
		s.InterPod = PreFilterInterPod(p, nodes)
	}
	if len(p.SpreadConstraints) > 0 {
		s.HardSpread = PreFilterSpread(p, nodes, true)
		s.SoftSpread = PreFilterSpread(p, nodes, false)
	}
	return s
}

// Filter runs the filters in upstream's order and returns the reasons of
// the first that rejects n (nil when n fits).
func Filter(s *State, n *framework.NodeInfo) []string {
	if r := Unresolvable(s.Pod, n); r != nil {
		return r
	}
	p := s.Pod
	if r := NodePorts(p, n); r != nil {
		return r
	}
	if r := NodeResourcesFit(p, n); r != nil {
		return r
	}
	if r := VolumeBinding(s.Volumes, n); r != nil {
		return r
	}
	if r := InterPodAffinity(p, s.InterPod, n); r != nil {
		return r
	}
	return PodTopologySpread(p, s.HardSpread, n)
}

// Unresolvable runs the filters that depend on the node alone, in
// upstream's order: those whose failure upstream reports as
// UnschedulableAndUnresolvable, which no eviction of pods can fix. The
// rest (ports, resources, inter-pod affinity, topology spread) depend on
// the pods the node runs.
func Unresolvable(p *framework.PodInfo, n *framework.NodeInfo) []string {
	pod := p.Pod
	if r := NodeUnschedulable(pod, n); r != nil {
		return r
	}
	if r := NodeName(pod, n); r != nil {
		return r
	}
	if r := TaintToleration(pod, n); r != nil {
		return r
	}
	if r := NodeConditions(n); r != nil {
		return r
	}
	return NodeAffinity(p, n)
}

// ForNodes is s computed again over nodes, for the same pod: preemption
// asks whether the pod fits once some pods are gone, and inter-pod
// affinity and topology spread count pods on every node. s itself when
// it precomputed nothing.
func (s *State) ForNodes(nodes []*framework.NodeInfo) *State {
	if s.InterPod == nil && s.HardSpread == nil {
		return s
	}
	out := &State{Pod: s.Pod, SoftSpread: s.SoftSpread, Volumes: s.Volumes}
	if s.InterPod != nil {
		out.InterPod = PreFilterInterPod(s.Pod, nodes)
	}
	if s.HardSpread != nil {
		out.HardSpread = PreFilterSpread(s.Pod, nodes, true)
	}
	return out
}

// Scorer computes raw scores for a pod: Raw fills raw[k][i] for node i
// (it may run concurrently for different i), Total normalizes each score to
// 0..100, weights it and sums per node.
type Scorer struct {
	s      *State
	w      Weights
	active [numScorers]bool
	raw    [numScorers][]int64
}

// NewScorer prepares scoring of s over n nodes with weights w; scores that
// cannot tell nodes apart for this pod are skipped.
func NewScorer(s *State, w Weights, n int) *Scorer {
	sc := &Scorer{s: s, w: w}
	p := s.Pod
	sc.active = [numScorers]bool{
		scoreLeast:    w[scoreLeast] != 0,
		scoreBalanced: w[scoreBalanced] != 0 && (p.Requests.MilliCPU != 0 || p.Requests.Memory != 0),
		scoreOwner:    w[scoreOwner] != 0 && p.OwnerUID != "",
		scoreSpread:   w[scoreSpread] != 0 && s.SoftSpread != nil,
		scoreAffinity: w[scoreAffinity] != 0 && len(p.PreferredAffinity) > 0,
		scoreTaint:    w[scoreTaint] != 0,
	}
	for k := range sc.raw {
		if sc.active[k] {
			sc.raw[k] = make([]int64, n)
		}
	}
	return sc
}

// Raw computes the raw scores of node i.
func (sc *Scorer) Raw(i int, n *framework.NodeInfo) {
	p := sc.s.Pod
	if sc.active[scoreLeast] {
		sc.raw[scoreLeast][i] = LeastAllocated(p, n)
	}
	if sc.active[scoreBalanced] {
		sc.raw[scoreBalanced][i] = BalancedAllocation(p, n)
	}
	if sc.active[scoreOwner] {
		sc.raw[scoreOwner][i] = OwnerSpread(p, n)
	}
	if sc.active[scoreSpread] {
		sc.raw[scoreSpread][i] = SpreadScore(sc.s.SoftSpread, n)
	}
	if sc.active[scoreAffinity] {
		sc.raw[scoreAffinity][i] = PreferredNodeAffinity(p, n)
	}
	if sc.active[scoreTaint] {
		sc.raw[scoreTaint][i] = PreferNoScheduleTaints(p.Pod, n)
	}
}

// Total normalizes and weights the raw scores of nodes and returns the
// sum per node.
func (sc *Scorer) Total(nodes []*framework.NodeInfo) []int64 {
	if sc.active[scoreOwner] {
		NormalizeOwnerSpread(nodes, sc.raw[scoreOwner])
	}
	if sc.active[scoreSpread] {
		NormalizeSpread(sc.raw[scoreSpread])
	}
	if sc.active[scoreAffinity] {
		NormalizeMax(sc.raw[scoreAffinity], false)
	}
	if sc.active[scoreTaint] {
		NormalizeMax(sc.raw[scoreTaint], true)
	}
	total := make([]int64, len(nodes))
	for k := range sc.raw {
		if !sc.active[k] {
			continue
		}
		for i, v := range sc.raw[k] {
			total[i] += v * sc.w[k]
		}
	}
	return total
}
