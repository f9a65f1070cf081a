package eviction

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// State is what one pass hands the next: when each threshold was first
// seen met (soft grace periods), when each condition was last seen
// (pressure transition period) and which thresholds were acted on (a
// minimum reclaim keeps them met until it is reclaimed).
type State struct {
	FirstObserved map[string]time.Time                   // by Threshold.key
	LastObserved  map[corev1.NodeConditionType]time.Time // conditions
	Met           []Threshold                            // grace period over at the last pass
}

// Inputs are one pass's measurements and settings.
type Inputs struct {
	Now          time.Time
	Thresholds   []Threshold
	Observations Observations
	// TransitionPeriod keeps a condition reported that long after its
	// thresholds stopped being met (--eviction-pressure-transition-period),
	// so that the node does not flap between pressure and none.
	TransitionPeriod time.Duration
}

// Decision is what a pass should do.
type Decision struct {
	Next State
	// Conditions are the pressure conditions to report, sorted.
	Conditions []corev1.NodeConditionType
	// Act are the thresholds whose grace period is over, memory first
	// (upstream's byEvictionPriority); empty: nothing to reclaim.
	Act []Threshold
}

// Reclaim is the threshold to act on (upstream's getReclaimableThreshold):
// the first of Act; ok is false when there is none.
func (d Decision) Reclaim() (t Threshold, ok bool) {
	if len(d.Act) == 0 {
		return Threshold{}, false
	}
	return d.Act[0], true
}

// Plan is upstream's synchronize up to the choice of what to reclaim: the
// thresholds met now, plus those acted on before whose minimum reclaim is
// not reached yet; the conditions they imply, held for the transition
// period; and those whose grace period is over. It reads prev and returns
// the next state; it never changes prev.
func Plan(in Inputs, prev State) Decision {
	var met []Threshold
	for _, t := range in.Thresholds {
		if t.met(in.Observations, false) {
			met = append(met, t)
		}
	}
	for _, t := range prev.Met {
		if t.met(in.Observations, true) && !slices.ContainsFunc(met, func(m Threshold) bool { return m.key() == t.key() }) {
			met = append(met, t)
		}
	}
	next := State{FirstObserved: map[string]time.Time{}, LastObserved: map[corev1.NodeConditionType]time.Time{}}
	for _, t := range met {
		at, ok := prev.FirstObserved[t.key()]
		if !ok {
			at = in.Now
		}
		next.FirstObserved[t.key()] = at
	}
	// Conditions come from every threshold met, soft ones inside their
	// grace period too, as upstream: pressure shows before evictions start.
	for c, at := range prev.LastObserved {
		next.LastObserved[c] = at
	}
	for _, t := range met {
		next.LastObserved[signalCondition[t.Signal]] = in.Now
	}
	var conds []corev1.NodeConditionType
	for c, at := range next.LastObserved {
		if at.Equal(in.Now) || in.Now.Sub(at) < in.TransitionPeriod {
			conds = append(conds, c)
		} else {
			delete(next.LastObserved, c)
		}
	}
	slices.Sort(conds)
	var act []Threshold
	for _, t := range met {
		if in.Now.Sub(next.FirstObserved[t.key()]) >= t.GracePeriod {
			act = append(act, t)
		}
	}
	next.Met = act
	// Memory first; the rest in configuration order (stable).
	sorted := slices.Clone(act)
	slices.SortStableFunc(sorted, func(a, b Threshold) int {
		return cmpBool(a.Signal == MemoryAvailable, b.Signal == MemoryAvailable)
	})
	return Decision{Next: next, Conditions: conds, Act: sorted}
}

// StillMet reports whether any threshold is met by obs counting minimum
// reclaims, grace periods ignored: after a node-level reclaim, upstream
// evicts no pod unless one is.
func StillMet(thresholds []Threshold, obs Observations) bool {
	return slices.ContainsFunc(thresholds, func(t Threshold) bool { return t.met(obs, true) })
}

// cmpBool orders true before false.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}
