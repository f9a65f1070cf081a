package plugins

import (
	"github.com/nodelet/nodelet/controlplane/scheduler/framework"
)

// topologyPair is one topology domain: a node label key and its value.
type topologyPair struct{ key, value string }

// InterPodState is what the required inter-pod (anti-)affinity filter
// precomputes over all nodes once per cycle.
type InterPodState struct {
	// existingAnti counts, per domain, existing pods whose required
	// anti-affinity selects the incoming pod.
	existingAnti map[topologyPair]int
	// affinity counts, per domain of each affinity term, existing pods that
	// match all the incoming pod's affinity terms.
	affinity map[topologyPair]int
	// anti counts, per domain, existing pods an anti-affinity term of the
	// incoming pod selects.
	anti map[topologyPair]int
	// selfMatch: the incoming pod matches all its own affinity terms (the
	// first pod of a group may then go anywhere).
	selfMatch bool
}

// PreFilterInterPod computes the inter-pod state; nil when neither the pod
// nor any existing pod has required (anti-)affinity to check.
func PreFilterInterPod(p *framework.PodInfo, nodes []*framework.NodeInfo) *InterPodState {
	s := &InterPodState{}
	for _, n := range nodes {
		for _, e := range n.PodsWithRequiredAntiAffinity {
			for i := range e.RequiredAntiAffinity {
				t := &e.RequiredAntiAffinity[i]
				if v, ok := n.Labels[t.TopologyKey]; ok && t.Matches(p) {
					s.existingAnti = inc(s.existingAnti, topologyPair{t.TopologyKey, v})
				}
			}
		}
	}
	if len(p.RequiredAffinity) == 0 && len(p.RequiredAntiAffinity) == 0 {
		if s.existingAnti == nil {
			return nil
		}
		return s
	}
	for _, n := range nodes {
		for _, e := range n.Pods {
			if matchesAll(p.RequiredAffinity, e) {
				for i := range p.RequiredAffinity {
					k := p.RequiredAffinity[i].TopologyKey
					if v, ok := n.Labels[k]; ok {
						s.affinity = inc(s.affinity, topologyPair{k, v})
					}
				}
			}
			for i := range p.RequiredAntiAffinity {
				t := &p.RequiredAntiAffinity[i]
				if v, ok := n.Labels[t.TopologyKey]; ok && t.Matches(e) {
					s.anti = inc(s.anti, topologyPair{t.TopologyKey, v})
				}
			}
		}
	}
	s.selfMatch = matchesAll(p.RequiredAffinity, p)
	return s
}

func matchesAll(terms []framework.AffinityTerm, e *framework.PodInfo) bool {
	if len(terms) == 0 {
		return false
	}
	for i := range terms {
		if !terms[i].Matches(e) {
			return false
		}
	}
	return true
}

func inc(m map[topologyPair]int, k topologyPair) map[topologyPair]int {
	if m == nil {
		m = map[topologyPair]int{}
	}
	m[k]++
	return m
}

// InterPodAffinity is the required inter-pod affinity filter. s may be nil
// (nothing to check).
func InterPodAffinity(p *framework.PodInfo, s *InterPodState, n *framework.NodeInfo) []string {
	if s == nil {
		return nil
	}
	if len(s.existingAnti) > 0 {
		for k, v := range n.Labels {
			if s.existingAnti[topologyPair{k, v}] > 0 {
				return rExistingAnti
			}
		}
	}
	for i := range p.RequiredAntiAffinity {
		k := p.RequiredAntiAffinity[i].TopologyKey
		if v, ok := n.Labels[k]; ok && s.anti[topologyPair{k, v}] > 0 {
			return rAntiAffinity
		}
	}
	for i := range p.RequiredAffinity {
		k := p.RequiredAffinity[i].TopologyKey
		v, ok := n.Labels[k]
		if ok && s.affinity[topologyPair{k, v}] > 0 {
			continue
		}
		// No pod anywhere matches: the pod may start its own group if it
		// matches its own terms and the node has the topology labels.
		if !ok || len(s.affinity) > 0 || !s.selfMatch {
			return rAffinity
		}
	}
	return nil
}
