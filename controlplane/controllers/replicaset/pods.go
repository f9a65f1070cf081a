package replicaset

import (
	"sort"
	"strconv"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// SlowStartInitialBatchSize is the first batch of pod creations; each
// successful batch doubles the next one.
const SlowStartInitialBatchSize = 1

// podDeletionCostAnnotation lets users rank pods for scale-down (lower cost
// goes first), as upstream's PodDeletionCost feature does.
const podDeletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"

// IsPodActive reports whether pod counts towards a ReplicaSet's replicas: it
// is neither finished nor terminating.
func IsPodActive(p *corev1.Pod) bool {
	return p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && p.DeletionTimestamp == nil
}

// FilterActivePods returns the active pods of pods, in order.
func FilterActivePods(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if IsPodActive(p) {
			out = append(out, p)
		}
	}
	return out
}

// podReadyCondition returns pod's Ready condition, or nil.
func podReadyCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// IsPodReady reports whether pod's Ready condition is True.
func IsPodReady(p *corev1.Pod) bool {
	c := podReadyCondition(p)
	return c != nil && c.Status == corev1.ConditionTrue
}

// IsPodAvailable reports whether pod has been ready for at least
// minReadySeconds at now.
func IsPodAvailable(p *corev1.Pod, minReadySeconds int32, now time.Time) bool {
	c := podReadyCondition(p)
	if c == nil || c.Status != corev1.ConditionTrue {
		return false
	}
	if minReadySeconds == 0 {
		return true
	}
	d := time.Duration(minReadySeconds) * time.Second
	return !c.LastTransitionTime.IsZero() && c.LastTransitionTime.Add(d).Before(now)
}

// slowStartBatch calls fn count times in batches of 1, 2, 4, ... (starting at
// initial), in parallel within a batch. It stops after the first batch with a
// failure, so a systematic error (quota, admission) costs a handful of calls
// rather than count. It returns the number of successful calls and the first
// error.
func slowStartBatch(count, initial int, fn func() error) (int, error) {
	remaining, successes := count, 0
	for batch := min(remaining, initial); batch > 0; batch = min(2*batch, remaining) {
		errCh := make(chan error, batch)
		var wg sync.WaitGroup
		wg.Add(batch)
		for range batch {
			go func() {
				defer wg.Done()
				if err := fn(); err != nil {
					errCh <- err
				}
			}()
		}
		wg.Wait()
		successes += batch - len(errCh)
		if len(errCh) > 0 {
			return successes, <-errCh
		}
		remaining -= batch
	}
	return successes, nil
}

var phaseOrdinal = map[corev1.PodPhase]int{corev1.PodPending: 0, corev1.PodUnknown: 1, corev1.PodRunning: 2}

// rankedPods orders pods by how cheap they are to delete: the first is the
// best victim. rank[i] is the number of related active pods on pod i's node;
// pods on crowded nodes go first, which spreads the survivors.
type rankedPods struct {
	pods []*corev1.Pod
	rank []int
}

func (s rankedPods) Len() int { return len(s.pods) }
func (s rankedPods) Swap(i, j int) {
	s.pods[i], s.pods[j] = s.pods[j], s.pods[i]
	s.rank[i], s.rank[j] = s.rank[j], s.rank[i]
}

// Less follows upstream's ActivePodsWithRanks (without logarithmic age
// buckets): unscheduled < scheduled; Pending < Unknown < Running; not ready <
// ready; lower deletion cost; more pods on the same node; ready for less
// time; more restarts; younger.
func (s rankedPods) Less(i, j int) bool {
	a, b := s.pods[i], s.pods[j]
	if a.Spec.NodeName != b.Spec.NodeName && (a.Spec.NodeName == "" || b.Spec.NodeName == "") {
		return a.Spec.NodeName == ""
	}
	if pa, pb := phaseOrdinal[a.Status.Phase], phaseOrdinal[b.Status.Phase]; pa != pb {
		return pa < pb
	}
	ra, rb := IsPodReady(a), IsPodReady(b)
	if ra != rb {
		return !ra
	}
	if ca, cb := deletionCost(a), deletionCost(b); ca != cb {
		return ca < cb
	}
	if s.rank[i] != s.rank[j] {
		return s.rank[i] > s.rank[j]
	}
	if ra && rb {
		ta, tb := podReadyCondition(a).LastTransitionTime, podReadyCondition(b).LastTransitionTime
		if !ta.Equal(&tb) {
			return afterOrZero(&ta, &tb)
		}
	}
	if na, nb := maxRestarts(a), maxRestarts(b); na != nb {
		return na > nb
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return afterOrZero(&a.CreationTimestamp, &b.CreationTimestamp)
	}
	return false
}

// afterOrZero reports whether t1 is zero or later than t2: unknown times sort
// as the youngest.
func afterOrZero(t1, t2 *metav1.Time) bool {
	if t1.IsZero() || t2.IsZero() {
		return t1.IsZero()
	}
	return t1.After(t2.Time)
}

func deletionCost(p *corev1.Pod) int32 {
	v, ok := p.Annotations[podDeletionCostAnnotation]
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0
	}
	return int32(n)
}

func maxRestarts(p *corev1.Pod) int32 {
	var n int32
	for _, c := range p.Status.ContainerStatuses {
		n = max(n, c.RestartCount)
	}
	return n
}

// podsToDelete picks diff victims out of active (the ReplicaSet's active
// pods), ranking them against related (the active pods of all ReplicaSets
// of the same owner, for node crowding). active is reordered.
func podsToDelete(active, related []*corev1.Pod, diff int) []*corev1.Pod {
	if diff >= len(active) {
		return active
	}
	onNode := map[string]int{}
	for _, p := range related {
		if IsPodActive(p) {
			onNode[p.Spec.NodeName]++
		}
	}
	r := rankedPods{pods: active, rank: make([]int, len(active))}
	for i, p := range active {
		r.rank[i] = onNode[p.Spec.NodeName]
	}
	sort.Sort(r)
	return active[:diff]
}

// calculateStatus computes rs's status from its claimed active pods and the
// error (if any) of the last attempt to reach spec.replicas. Conditions are
// copied, not shared with rs.
func calculateStatus(rs *appsv1.ReplicaSet, pods []*corev1.Pod, manageErr error, now time.Time) appsv1.ReplicaSetStatus {
	st := *rs.Status.DeepCopy()
	template := labels.Set(rs.Spec.Template.Labels).AsSelectorPreValidated()
	var fully, ready, available int32
	for _, p := range pods {
		if template.Matches(labels.Set(p.Labels)) {
			fully++
		}
		if IsPodReady(p) {
			ready++
			if IsPodAvailable(p, rs.Spec.MinReadySeconds, now) {
				available++
			}
		}
	}
	failure := replicaSetCondition(st, appsv1.ReplicaSetReplicaFailure)
	switch {
	case manageErr != nil && failure == nil:
		reason := ""
		if diff := len(pods) - int(replicas(rs)); diff < 0 {
			reason = "FailedCreate"
		} else if diff > 0 {
			reason = "FailedDelete"
		}
		st.Conditions = append(st.Conditions, appsv1.ReplicaSetCondition{
			Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(now), Reason: reason, Message: manageErr.Error(),
		})
	case manageErr == nil && failure != nil:
		var kept []appsv1.ReplicaSetCondition
		for _, c := range st.Conditions {
			if c.Type != appsv1.ReplicaSetReplicaFailure {
				kept = append(kept, c)
			}
		}
		st.Conditions = kept
	}
	st.Replicas = int32(len(pods))
	st.FullyLabeledReplicas = fully
	st.ReadyReplicas = ready
	st.AvailableReplicas = available
	return st
}

func replicaSetCondition(st appsv1.ReplicaSetStatus, t appsv1.ReplicaSetConditionType) *appsv1.ReplicaSetCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

// replicas is spec.replicas with the API default of 1.
func replicas(rs *appsv1.ReplicaSet) int32 {
	if rs.Spec.Replicas == nil {
		return 1
	}
	return *rs.Spec.Replicas
}

// podKey names a pod for deletion expectations.
func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

// podFromTemplate builds a pod for rs: generateName "<rs>-", the template's
// labels, annotations, finalizers and spec, and ref as its controller.
func podFromTemplate(rs *appsv1.ReplicaSet, ref *metav1.OwnerReference) *corev1.Pod {
	t := rs.Spec.Template.DeepCopy()
	prefix := rs.Name + "-"
	if len(prefix) > 58 { // leave room for the 5 random characters within 63
		prefix = prefix[:58]
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: prefix,
			Namespace:    rs.Namespace,
			Labels:       t.Labels,
			Annotations:  t.Annotations,
			Finalizers:   t.Finalizers,
		},
		Spec: t.Spec,
	}
	if ref != nil {
		p.OwnerReferences = []metav1.OwnerReference{*ref}
	}
	return p
}
