package eviction

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/podresources"
)

// PodStats is one pod's usage, as the ranking reads it.
type PodStats struct {
	Memory    int64 // working set of the pod cgroup, bytes
	Disk      int64 // bytes of its logs and disk-backed local volumes
	Inodes    int64 // inodes of the same
	Processes int64 // tasks in the pod cgroup
}

// Eviction is the pod to evict and how.
type Eviction struct {
	Pod *corev1.Pod
	// Signal is the threshold's signal (the kubelet_evictions label).
	Signal Signal
	// GracePeriod: 0 for a hard threshold; for a soft one
	// --eviction-max-pod-grace-period, capped by the pod's own.
	GracePeriod int64
	// Message is upstream's status message: "The node was low on
	// resource: memory. Threshold quantity: 100Mi, available: 12Mi. ".
	Message string
}

// Status returns the evicted pod's status from its current one: Failed,
// reason Evicted, the message, and a DisruptionTarget condition, as
// upstream's eviction manager sets them.
func (e Eviction) Status(st corev1.PodStatus, now metav1.Time) corev1.PodStatus {
	st = *st.DeepCopy()
	st.Phase, st.Reason, st.Message = corev1.PodFailed, Reason, e.Message
	cond := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: corev1.PodReasonTerminationByKubelet, Message: e.Message, LastTransitionTime: now}
	i := slices.IndexFunc(st.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.DisruptionTarget })
	if i < 0 {
		st.Conditions = append(st.Conditions, cond)
	} else if st.Conditions[i].Status != cond.Status || st.Conditions[i].Message != cond.Message {
		st.Conditions[i] = cond
	}
	return st
}

// Victim ranks pods for t's resource as upstream does and returns the
// first that may be evicted: critical pods (static, mirror, or of
// system-critical priority) never are. stats misses pods that could not be
// measured; upstream ranks those first. act is the thresholds acted on this
// pass (the message quotes the first one of t's resource).
func Victim(t Threshold, act []Threshold, obs Observations, pods []*corev1.Pod, stats map[types.UID]PodStats, maxGrace int64) (Eviction, bool) {
	res := signalResource[t.Signal]
	ranked := slices.Clone(pods)
	slices.SortStableFunc(ranked, rankFunc(res, stats))
	for _, p := range ranked {
		if IsCriticalPod(p) {
			continue
		}
		e := Eviction{Pod: p, Signal: t.Signal, Message: message(res, act, obs)}
		if !t.Hard() {
			e.GracePeriod = max(maxGrace, 0)
			if g := p.Spec.TerminationGracePeriodSeconds; g != nil {
				e.GracePeriod = min(e.GracePeriod, max(*g, 0))
			}
		}
		return e, true
	}
	return Eviction{}, false
}

type cmpPods func(a, b *corev1.Pod) int

// rankFunc is upstream's ranking for a resource: memory and disk: pods
// using more than they request first, then lower priority, then larger
// usage above the request; pids: lower priority, then more processes.
func rankFunc(res corev1.ResourceName, stats map[types.UID]PodStats) cmpPods {
	if res == resourcePIDs {
		return chain(priority, byUsage(res, stats, false))
	}
	return chain(exceedsRequests(res, stats), priority, byUsage(res, stats, true))
}

func chain(cmps ...cmpPods) cmpPods {
	return func(a, b *corev1.Pod) int {
		for _, c := range cmps {
			if r := c(a, b); r != 0 {
				return r
			}
		}
		return 0
	}
}

// exceedsRequests puts pods without stats first, then pods whose usage
// exceeds their request.
func exceedsRequests(res corev1.ResourceName, stats map[types.UID]PodStats) cmpPods {
	return func(a, b *corev1.Pod) int {
		sa, oka := stats[a.UID]
		sb, okb := stats[b.UID]
		if !oka || !okb {
			return cmpBool(!oka, !okb)
		}
		return cmpBool(usage(sa, res) > request(a, res), usage(sb, res) > request(b, res))
	}
}

// byUsage puts the larger usage (minus the request, when relative) first.
func byUsage(res corev1.ResourceName, stats map[types.UID]PodStats, relative bool) cmpPods {
	return func(a, b *corev1.Pod) int {
		sa, oka := stats[a.UID]
		sb, okb := stats[b.UID]
		if !oka || !okb {
			return cmpBool(!oka, !okb)
		}
		ua, ub := usage(sa, res), usage(sb, res)
		if relative {
			ua, ub = ua-request(a, res), ub-request(b, res)
		}
		switch {
		case ua > ub:
			return -1
		case ua < ub:
			return 1
		}
		return 0
	}
}

// priority puts lower priority first.
func priority(a, b *corev1.Pod) int {
	pa, pb := podPriority(a), podPriority(b)
	switch {
	case pa < pb:
		return -1
	case pa > pb:
		return 1
	}
	return 0
}

func podPriority(p *corev1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	return 0
}

func usage(s PodStats, res corev1.ResourceName) int64 {
	switch res {
	case corev1.ResourceMemory:
		return s.Memory
	case corev1.ResourceEphemeralStorage:
		return s.Disk
	case resourceInodes:
		return s.Inodes
	case resourcePIDs:
		return s.Processes
	}
	return 0
}

// request is the pod's effective request (init containers included, as
// upstream's); inodes and pids cannot be requested.
func request(p *corev1.Pod, res corev1.ResourceName) int64 {
	if res != corev1.ResourceMemory && res != corev1.ResourceEphemeralStorage {
		return 0
	}
	q, ok := podresources.Requests(p)[res]
	if !ok {
		return 0
	}
	return q.Value()
}

// message is upstream's evictionMessage without the per-container part.
func message(res corev1.ResourceName, act []Threshold, obs Observations) string {
	msg := fmt.Sprintf("The node was low on resource: %s. ", res)
	for _, t := range act {
		if signalResource[t.Signal] != res {
			continue
		}
		if o, ok := obs[t.Signal]; ok {
			f := quantityFormat(t.Signal)
			msg += fmt.Sprintf("Threshold quantity: %s, available: %s. ",
				resource.NewQuantity(t.Value.amount(o.Capacity), f), resource.NewQuantity(o.Available, f))
		}
		break
	}
	return msg
}

// Upstream's markers of critical pods (pkg/kubelet/types).
const (
	systemCriticalPriority = 2000000000
	configSourceAnnotation = "kubernetes.io/config.source"
	configMirrorAnnotation = "kubernetes.io/config.mirror"
)

// IsCriticalPod is upstream's kubelettypes.IsCriticalPod: static and
// mirror pods, and pods of system-critical priority (system-node-critical,
// system-cluster-critical). They are never evicted and are admitted under
// any pressure.
func IsCriticalPod(p *corev1.Pod) bool {
	if src, ok := p.Annotations[configSourceAnnotation]; ok && src != "api" {
		return true
	}
	if _, ok := p.Annotations[configMirrorAnnotation]; ok {
		return true
	}
	return p.Spec.Priority != nil && *p.Spec.Priority >= systemCriticalPriority
}
