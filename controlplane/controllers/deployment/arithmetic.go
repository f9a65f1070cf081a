package deployment

import (
	"fmt"
	"math"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// This file holds the rollout arithmetic as pure functions over the
// Deployment and its ReplicaSets: how many pods may surge or be unavailable,
// how far to scale the new ReplicaSet up and the old ones down, and how to
// spread a scaling of the Deployment across its ReplicaSets. The controller
// turns their answers into API calls.

// scaleStep says: set rs's spec.replicas to replicas.
type scaleStep struct {
	rs       *appsv1.ReplicaSet
	replicas int32
}

func specReplicas(rs *appsv1.ReplicaSet) int32 {
	if rs == nil || rs.Spec.Replicas == nil {
		return 0
	}
	return *rs.Spec.Replicas
}

func deploymentReplicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

// resolveFenceposts turns maxSurge and maxUnavailable into pod counts for
// desired replicas: a surge percentage rounds up, an unavailability one
// down, and if both come out zero unavailability becomes 1 so the rollout
// can progress (validation forbids both being zero literally, but rounding
// can produce it).
func resolveFenceposts(maxSurge, maxUnavailable *intstr.IntOrString, desired int32) (int32, int32, error) {
	zero := intstr.FromInt32(0)
	surge, err := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(maxSurge, zero), int(desired), true)
	if err != nil {
		return 0, 0, fmt.Errorf("maxSurge: %w", err)
	}
	unavailable, err := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(maxUnavailable, zero), int(desired), false)
	if err != nil {
		return 0, 0, fmt.Errorf("maxUnavailable: %w", err)
	}
	if surge == 0 && unavailable == 0 {
		unavailable = 1
	}
	return int32(surge), int32(unavailable), nil
}

func isRollingUpdate(d *appsv1.Deployment) bool {
	return d.Spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType
}

func rollingParams(d *appsv1.Deployment) (surge, unavailable *intstr.IntOrString) {
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
		return ru.MaxSurge, ru.MaxUnavailable
	}
	return nil, nil
}

// maxSurge is the resolved surge of a RollingUpdate Deployment (0 otherwise).
func maxSurge(d *appsv1.Deployment) int32 {
	if !isRollingUpdate(d) {
		return 0
	}
	s, u := rollingParams(d)
	surge, _, _ := resolveFenceposts(s, u, deploymentReplicas(d))
	return surge
}

// maxUnavailable is the resolved unavailability of a RollingUpdate
// Deployment, never more than its replicas (0 for other strategies).
func maxUnavailable(d *appsv1.Deployment) int32 {
	if !isRollingUpdate(d) || deploymentReplicas(d) == 0 {
		return 0
	}
	s, u := rollingParams(d)
	_, unavailable, _ := resolveFenceposts(s, u, deploymentReplicas(d))
	return min(unavailable, deploymentReplicas(d))
}

// sumSpec, sumStatus, sumReady and sumAvailable add up a field over rss
// (nil entries allowed).
func sumSpec(rss []*appsv1.ReplicaSet) int32 {
	var n int32
	for _, rs := range rss {
		n += specReplicas(rs)
	}
	return n
}

func sumStatus(rss []*appsv1.ReplicaSet, f func(appsv1.ReplicaSetStatus) int32) int32 {
	var n int32
	for _, rs := range rss {
		if rs != nil {
			n += f(rs.Status)
		}
	}
	return n
}

func statusReplicas(s appsv1.ReplicaSetStatus) int32  { return s.Replicas }
func statusReady(s appsv1.ReplicaSetStatus) int32     { return s.ReadyReplicas }
func statusAvailable(s appsv1.ReplicaSetStatus) int32 { return s.AvailableReplicas }

// filterActive returns the ReplicaSets with spec.replicas > 0.
func filterActive(rss []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	for _, rs := range rss {
		if specReplicas(rs) > 0 {
			out = append(out, rs)
		}
	}
	return out
}

// newRSNewReplicas is the size the new ReplicaSet may grow to now. Rolling:
// total pods (by spec) stay within replicas+maxSurge and the new ReplicaSet
// within replicas. Recreate: all replicas at once.
func newRSNewReplicas(d *appsv1.Deployment, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) (int32, error) {
	switch d.Spec.Strategy.Type {
	case appsv1.RollingUpdateDeploymentStrategyType:
		want := deploymentReplicas(d)
		maxTotal := want + maxSurge(d)
		current := sumSpec(allRSs)
		if current >= maxTotal {
			return specReplicas(newRS), nil
		}
		up := min(maxTotal-current, want-specReplicas(newRS))
		return specReplicas(newRS) + up, nil
	case appsv1.RecreateDeploymentStrategyType:
		return deploymentReplicas(d), nil
	default:
		return 0, fmt.Errorf("deployment strategy %q is not supported", d.Spec.Strategy.Type)
	}
}

// rollingScaleDownPlan is how the old ReplicaSets shrink in one rolling
// step, keeping at least replicas-maxUnavailable pods available. First the
// unavailable pods of old ReplicaSets go (they cost no availability and
// would otherwise block the rollout), oldest ReplicaSet first; then
// available old pods, as far as the availability reported by all
// ReplicaSets allows. oldRSs are the active old ReplicaSets; they are not
// modified. Steps for the same ReplicaSet are merged into the last one.
func rollingScaleDownPlan(d *appsv1.Deployment, allRSs, oldRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) []scaleStep {
	if sumSpec(oldRSs) == 0 {
		return nil
	}
	minAvailable := deploymentReplicas(d) - maxUnavailable(d)
	newUnavailable := specReplicas(newRS) - newRS.Status.AvailableReplicas
	maxScaledDown := sumSpec(allRSs) - minAvailable - newUnavailable
	if maxScaledDown <= 0 {
		return nil
	}
	// Work on copies of the sizes so the two phases see each other's effect.
	olds := append([]*appsv1.ReplicaSet(nil), oldRSs...)
	sort.Sort(byCreation(olds))
	size := make(map[*appsv1.ReplicaSet]int32, len(olds))
	for _, rs := range olds {
		size[rs] = specReplicas(rs)
	}
	var cleaned int32
	for _, rs := range olds {
		if cleaned >= maxScaledDown {
			break
		}
		if size[rs] == 0 || size[rs] == rs.Status.AvailableReplicas {
			continue
		}
		n := min(maxScaledDown-cleaned, size[rs]-rs.Status.AvailableReplicas)
		size[rs] -= n
		cleaned += n
	}
	available := sumStatus(append(olds, newRS), statusAvailable)
	if available > minAvailable {
		budget := available - minAvailable
		var done int32
		for _, rs := range olds {
			if done >= budget {
				break
			}
			if size[rs] == 0 {
				continue
			}
			n := min(size[rs], budget-done)
			size[rs] -= n
			done += n
		}
	}
	var plan []scaleStep
	for _, rs := range olds {
		if size[rs] != specReplicas(rs) {
			plan = append(plan, scaleStep{rs: rs, replicas: size[rs]})
		}
	}
	return plan
}

// proportionalScalePlan spreads a change of the Deployment's size over its
// active ReplicaSets during a rollout, in proportion to each one's share of
// the size recorded in its max-replicas annotation, so that a scale-up
// mid-rollout neither starves nor favours the new ReplicaSet. Rounding
// leftovers go to the largest ReplicaSet (newest on ties when growing,
// oldest when shrinking). It returns the target size of every active
// ReplicaSet, in the order they should be scaled, and "up"/"down".
func proportionalScalePlan(d *appsv1.Deployment, active []*appsv1.ReplicaSet) ([]scaleStep, string) {
	rss := append([]*appsv1.ReplicaSet(nil), active...)
	allowed := int32(0)
	if deploymentReplicas(d) > 0 {
		allowed = deploymentReplicas(d) + maxSurge(d)
	}
	toAdd := allowed - sumSpec(rss)
	op := ""
	switch {
	case toAdd > 0:
		sort.Sort(bySizeNewer(rss))
		op = "up"
	case toAdd < 0:
		sort.Sort(bySizeOlder(rss))
		op = "down"
	}
	plan := make([]scaleStep, len(rss))
	var added int32
	for i, rs := range rss {
		plan[i] = scaleStep{rs: rs, replicas: specReplicas(rs)}
		if toAdd != 0 {
			p := proportion(rs, d, toAdd, added)
			plan[i].replicas += p
			added += p
		}
	}
	if len(plan) > 0 && toAdd != 0 {
		plan[0].replicas = max(plan[0].replicas+toAdd-added, 0)
	}
	return plan, op
}

// proportion is how many replicas rs gains (or loses, negative) out of
// toAdd, given that added were already handed out: its fraction, clamped so
// the running total never passes toAdd.
func proportion(rs *appsv1.ReplicaSet, d *appsv1.Deployment, toAdd, added int32) int32 {
	if specReplicas(rs) == 0 || toAdd == 0 || toAdd == added {
		return 0
	}
	f := fraction(rs, d)
	left := toAdd - added
	if toAdd > 0 {
		return min(f, left)
	}
	return max(f, left)
}

// fraction is rs's size scaled from the Deployment size it was sized for
// (the max-replicas annotation, else the current status.replicas) to the
// new one, minus its current size. Scaling to zero removes everything.
func fraction(rs *appsv1.ReplicaSet, d *appsv1.Deployment) int32 {
	if deploymentReplicas(d) == 0 {
		return -specReplicas(rs)
	}
	target := deploymentReplicas(d) + maxSurge(d)
	annotated, ok := intAnnotation(rs, MaxReplicasAnnotation)
	if !ok || annotated == 0 {
		annotated = d.Status.Replicas
	}
	if annotated == 0 {
		return 0
	}
	newSize := float64(specReplicas(rs)*target) / float64(annotated)
	return int32(math.Round(newSize)) - specReplicas(rs)
}

// isSaturated reports whether rs is sized, annotated and available for the
// Deployment's full replicas.
func isSaturated(d *appsv1.Deployment, rs *appsv1.ReplicaSet) bool {
	if rs == nil {
		return false
	}
	desired, ok := intAnnotation(rs, DesiredReplicasAnnotation)
	want := deploymentReplicas(d)
	return ok && specReplicas(rs) == want && desired == want && rs.Status.AvailableReplicas == want
}

// findActiveOrLatest returns the only active ReplicaSet, or the newest one
// if none is active; nil if several are active (proportional scaling).
func findActiveOrLatest(newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	if newRS == nil && len(oldRSs) == 0 {
		return nil
	}
	olds := append([]*appsv1.ReplicaSet(nil), oldRSs...)
	sort.Sort(sort.Reverse(byCreation(olds)))
	all := olds
	if newRS != nil {
		all = append(all, newRS)
	}
	active := filterActive(all)
	switch len(active) {
	case 0:
		if newRS != nil {
			return newRS
		}
		return olds[0]
	case 1:
		return active[0]
	}
	return nil
}

// byCreation orders ReplicaSets oldest first, by name on ties.
type byCreation []*appsv1.ReplicaSet

func (o byCreation) Len() int      { return len(o) }
func (o byCreation) Swap(i, j int) { o[i], o[j] = o[j], o[i] }
func (o byCreation) Less(i, j int) bool {
	if o[i].CreationTimestamp.Equal(&o[j].CreationTimestamp) {
		return o[i].Name < o[j].Name
	}
	return o[i].CreationTimestamp.Before(&o[j].CreationTimestamp)
}

// bySizeNewer orders largest first, newer first on ties (scale-up order).
type bySizeNewer []*appsv1.ReplicaSet

func (o bySizeNewer) Len() int      { return len(o) }
func (o bySizeNewer) Swap(i, j int) { o[i], o[j] = o[j], o[i] }
func (o bySizeNewer) Less(i, j int) bool {
	if specReplicas(o[i]) == specReplicas(o[j]) {
		return byCreation(o).Less(j, i)
	}
	return specReplicas(o[i]) > specReplicas(o[j])
}

// bySizeOlder orders largest first, older first on ties (scale-down order).
type bySizeOlder []*appsv1.ReplicaSet

func (o bySizeOlder) Len() int      { return len(o) }
func (o bySizeOlder) Swap(i, j int) { o[i], o[j] = o[j], o[i] }
func (o bySizeOlder) Less(i, j int) bool {
	if specReplicas(o[i]) == specReplicas(o[j]) {
		return byCreation(o).Less(i, j)
	}
	return specReplicas(o[i]) > specReplicas(o[j])
}
