package scheduler

import (
	"math"
	"sort"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/nodelet/nodelet/controlplane/scheduler/framework"
	"github.com/nodelet/nodelet/controlplane/scheduler/plugins"
)

// Preemption as upstream's DefaultPreemption plugin does it: when a pod
// fits no node, find a node where evicting pods of lower priority lets it
// fit. Only nodes whose own properties admit the pod are considered (its
// taints, node affinity and the like stay as they are); on those, every
// filter is run again with the victims gone, so evictions may free
// resources and host ports, and lift inter-pod anti-affinity and topology
// spread. This file decides; preempt.go acts.

// Candidate is a node where the preemptor fits once Victims are gone.
type Candidate struct {
	Node string
	// Victims, lowest priority first (the order they are evicted in).
	Victims []*corev1.Pod
	// PDBViolations counts the victims whose eviction a
	// PodDisruptionBudget does not allow.
	PDBViolations int
}

// Nomination is a preemptor and the node it preempted on: until it is
// bound, its requests are held on that node against pods of lower
// priority, as upstream's nominator does.
type Nomination struct {
	Pod       *framework.PodInfo
	Candidate *Candidate
}

// AddNominated returns nodes, with the nominated pods of at least pi's
// priority (pi excepted) added to clones of their nodes; nodes itself is
// not modified.
func AddNominated(pi *framework.PodInfo, nodes []*framework.NodeInfo, noms []Nomination) []*framework.NodeInfo {
	prio := PodPriority(pi.Pod)
	byNode := map[string][]*framework.PodInfo{}
	for _, n := range noms {
		if n.Pod.Key != pi.Key && PodPriority(n.Pod.Pod) >= prio {
			byNode[n.Candidate.Node] = append(byNode[n.Candidate.Node], n.Pod)
		}
	}
	if len(byNode) == 0 {
		return nodes
	}
	out := make([]*framework.NodeInfo, len(nodes))
	for i, n := range nodes {
		out[i] = n
		if pods := byNode[n.Name()]; len(pods) > 0 {
			c := n.Clone()
			for _, p := range pods {
				c.AddPod(p)
			}
			out[i] = c
		}
	}
	return out
}

// PodPriority is spec.priority (0 when unset, as upstream).
func PodPriority(pod *corev1.Pod) int32 {
	if pod.Spec.Priority != nil {
		return *pod.Spec.Priority
	}
	return 0
}

// eligibleToPreempt: a pod with preemptionPolicy Never never preempts; one
// whose earlier preemption (pending) still has victims on the node, or
// that is nominated to a node where lower-priority pods are terminating,
// waits for them rather than evicting more.
func eligibleToPreempt(pod *corev1.Pod, nodes []*framework.NodeInfo, pending *Candidate) bool {
	if p := pod.Spec.PreemptionPolicy; p != nil && *p == corev1.PreemptNever {
		return false
	}
	for _, n := range nodes {
		switch {
		case pending != nil && n.Name() == pending.Node:
			for _, v := range pending.Victims {
				for _, p := range n.Pods {
					if p.Pod.UID == v.UID {
						return false
					}
				}
			}
		case n.Name() == pod.Status.NominatedNodeName:
			for _, p := range n.Pods {
				if p.Pod.DeletionTimestamp != nil && PodPriority(p.Pod) < PodPriority(pod) {
					return false
				}
			}
		}
	}
	return true
}

// SelectPreemption returns the best node to preempt on for the pod of st,
// or nil when no eviction of lower-priority pods makes it fit anywhere (or
// the pod waits on pending, its preemption in progress, if any).
// Nodes are ranked as upstream: fewest budget violations, then the lowest
// priority of the most important victim, the lowest sum of priorities,
// the fewest victims; the first in nodes' order wins ties.
func SelectPreemption(st *plugins.State, nodes []*framework.NodeInfo, pdbs []*policyv1.PodDisruptionBudget, pending *Candidate) *Candidate {
	if !eligibleToPreempt(st.Pod.Pod, nodes, pending) {
		return nil
	}
	var best *Candidate
	for i := range nodes {
		c := victimsOnNode(st, nodes, i, pdbs)
		if c != nil && (best == nil || betterCandidate(c, best)) {
			best = c
		}
	}
	return best
}

func betterCandidate(a, b *Candidate) bool {
	if a.PDBViolations != b.PDBViolations {
		return a.PDBViolations < b.PDBViolations
	}
	// Victims are sorted lowest priority first: the last is the highest.
	ha, hb := PodPriority(a.Victims[len(a.Victims)-1]), PodPriority(b.Victims[len(b.Victims)-1])
	if ha != hb {
		return ha < hb
	}
	if sa, sb := prioritySum(a.Victims), prioritySum(b.Victims); sa != sb {
		return sa < sb
	}
	return len(a.Victims) < len(b.Victims)
}

// prioritySum adds priorities shifted to be positive, as upstream does, so
// that more victims weigh more.
func prioritySum(pods []*corev1.Pod) int64 {
	var sum int64
	for _, p := range pods {
		sum += int64(PodPriority(p)) + int64(math.MaxInt32) + 1
	}
	return sum
}

// victimsOnNode finds the fewest pods to evict from nodes[i] so the
// preemptor fits: every lower-priority pod is removed, then each is given
// back, the most important first and the ones a budget protects before the
// others, as long as the preemptor still fits. Nil when the node cannot be
// made to fit.
func victimsOnNode(st *plugins.State, nodes []*framework.NodeInfo, i int, pdbs []*policyv1.PodDisruptionBudget) *Candidate {
	n := nodes[i]
	if n.Node == nil || plugins.Unresolvable(st.Pod, n) != nil {
		return nil
	}
	prio := PodPriority(st.Pod.Pod)
	var lower []*framework.PodInfo
	for _, p := range n.Pods {
		if PodPriority(p.Pod) < prio {
			lower = append(lower, p)
		}
	}
	if len(lower) == 0 {
		return nil
	}
	sim := n.Clone()
	for _, p := range lower {
		sim.RemovePod(p.Key)
	}
	simNodes := append([]*framework.NodeInfo(nil), nodes...)
	simNodes[i] = sim
	fits := func() bool { return plugins.Filter(st.ForNodes(simNodes), sim) == nil }
	if !fits() {
		return nil
	}
	sort.SliceStable(lower, func(i, j int) bool { return moreImportant(lower[i].Pod, lower[j].Pod) })
	violating, ok := splitByBudget(lower, pdbs)
	c := &Candidate{Node: n.Name()}
	reprieve := func(p *framework.PodInfo, violates bool) {
		sim.AddPod(p)
		if fits() {
			return
		}
		sim.RemovePod(p.Key)
		c.Victims = append(c.Victims, p.Pod)
		if violates {
			c.PDBViolations++
		}
	}
	for _, p := range violating {
		reprieve(p, true)
	}
	for _, p := range ok {
		reprieve(p, false)
	}
	if len(c.Victims) == 0 {
		return nil
	}
	sort.SliceStable(c.Victims, func(i, j int) bool { return moreImportant(c.Victims[j], c.Victims[i]) })
	return c
}

// moreImportant orders pods as upstream's MoreImportantPod: higher
// priority first, then the one that started earlier.
func moreImportant(a, b *corev1.Pod) bool {
	pa, pb := PodPriority(a), PodPriority(b)
	if pa != pb {
		return pa > pb
	}
	return startTime(a).Before(startTime(b))
}

func startTime(p *corev1.Pod) *metav1.Time {
	if p.Status.StartTime != nil {
		return p.Status.StartTime
	}
	return &p.CreationTimestamp
}

// splitByBudget splits pods (in order) into those whose eviction a budget
// does not allow and the others, counting down each matching budget's
// disruptionsAllowed as upstream's filterPodsWithPDBViolation does; pods
// already in a budget's disruptedPods are not counted again.
func splitByBudget(pods []*framework.PodInfo, pdbs []*policyv1.PodDisruptionBudget) (violating, ok []*framework.PodInfo) {
	allowed := make([]int32, len(pdbs))
	selectors := make([]labels.Selector, len(pdbs))
	for i, pdb := range pdbs {
		allowed[i] = pdb.Status.DisruptionsAllowed
		if sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err == nil && !sel.Empty() {
			selectors[i] = sel
		}
	}
	for _, p := range pods {
		violates := false
		for i, pdb := range pdbs {
			if selectors[i] == nil || pdb.Namespace != p.Pod.Namespace || !selectors[i].Matches(labels.Set(p.Pod.Labels)) {
				continue
			}
			if _, gone := pdb.Status.DisruptedPods[p.Pod.Name]; gone {
				continue
			}
			if allowed[i]--; allowed[i] < 0 {
				violates = true
			}
		}
		if violates {
			violating = append(violating, p)
		} else {
			ok = append(ok, p)
		}
	}
	return violating, ok
}
