package deployment

import (
	"fmt"
	"math"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition reasons, as upstream names them (kubectl and users match them).
const (
	ReasonReplicaSetUpdated    = "ReplicaSetUpdated"
	ReasonFailedRSCreate       = "ReplicaSetCreateError"
	ReasonNewReplicaSetCreated = "NewReplicaSetCreated"
	ReasonFoundNewReplicaSet   = "FoundNewReplicaSet"
	ReasonNewRSAvailable       = "NewReplicaSetAvailable"
	ReasonTimedOut             = "ProgressDeadlineExceeded"
	ReasonPaused               = "DeploymentPaused"
	ReasonResumed              = "DeploymentResumed"
	ReasonMinimumAvailable     = "MinimumReplicasAvailable"
	ReasonMinimumUnavailable   = "MinimumReplicasUnavailable"
)

func newCondition(t appsv1.DeploymentConditionType, s corev1.ConditionStatus, reason, msg string, now time.Time) appsv1.DeploymentCondition {
	ts := metav1.NewTime(now)
	return appsv1.DeploymentCondition{Type: t, Status: s, LastUpdateTime: ts, LastTransitionTime: ts, Reason: reason, Message: msg}
}

func getCondition(st appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

// setCondition stores c unless a condition of its type with the same status
// and reason exists; it keeps lastTransitionTime when the status is unchanged.
func setCondition(st *appsv1.DeploymentStatus, c appsv1.DeploymentCondition) {
	cur := getCondition(*st, c.Type)
	if cur != nil && cur.Status == c.Status && cur.Reason == c.Reason {
		return
	}
	if cur != nil && cur.Status == c.Status {
		c.LastTransitionTime = cur.LastTransitionTime
	}
	removeCondition(st, c.Type)
	st.Conditions = append(st.Conditions, c)
}

func removeCondition(st *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) {
	var kept []appsv1.DeploymentCondition
	for _, c := range st.Conditions {
		if c.Type != t {
			kept = append(kept, c)
		}
	}
	st.Conditions = kept
}

func hasProgressDeadline(d *appsv1.Deployment) bool {
	return d.Spec.ProgressDeadlineSeconds != nil && *d.Spec.ProgressDeadlineSeconds != math.MaxInt32
}

// calculateStatus computes the Deployment's counts from its ReplicaSets and
// the Available condition; other conditions are carried over.
func calculateStatus(allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment, now time.Time) appsv1.DeploymentStatus {
	available := sumStatus(allRSs, statusAvailable)
	st := appsv1.DeploymentStatus{
		ObservedGeneration:  d.Generation,
		Replicas:            sumStatus(allRSs, statusReplicas),
		UpdatedReplicas:     sumStatus([]*appsv1.ReplicaSet{newRS}, statusReplicas),
		ReadyReplicas:       sumStatus(allRSs, statusReady),
		AvailableReplicas:   available,
		UnavailableReplicas: max(sumSpec(allRSs)-available, 0),
		CollisionCount:      d.Status.CollisionCount,
	}
	for _, c := range d.Status.Conditions {
		st.Conditions = append(st.Conditions, *c.DeepCopy())
	}
	if available >= deploymentReplicas(d)-maxUnavailable(d) {
		setCondition(&st, newCondition(appsv1.DeploymentAvailable, corev1.ConditionTrue, ReasonMinimumAvailable, "Deployment has minimum availability.", now))
	} else {
		setCondition(&st, newCondition(appsv1.DeploymentAvailable, corev1.ConditionFalse, ReasonMinimumUnavailable, "Deployment does not have minimum availability.", now))
	}
	return st
}

// deploymentComplete: every replica updated and available, none old, and
// the latest spec observed. This is what `kubectl rollout status` waits for.
func deploymentComplete(d *appsv1.Deployment, st *appsv1.DeploymentStatus) bool {
	n := deploymentReplicas(d)
	return st.UpdatedReplicas == n && st.Replicas == n && st.AvailableReplicas == n && st.ObservedGeneration >= d.Generation
}

// deploymentProgressing: st moved the rollout forward compared with the
// stored status (more updated, fewer old, more ready or available pods).
func deploymentProgressing(d *appsv1.Deployment, st *appsv1.DeploymentStatus) bool {
	old := d.Status
	return st.UpdatedReplicas > old.UpdatedReplicas ||
		st.Replicas-st.UpdatedReplicas < old.Replicas-old.UpdatedReplicas ||
		st.ReadyReplicas > old.ReadyReplicas ||
		st.AvailableReplicas > old.AvailableReplicas
}

// deploymentTimedOut: the Progressing condition has not been updated for
// progressDeadlineSeconds.
func deploymentTimedOut(d *appsv1.Deployment, st *appsv1.DeploymentStatus, now time.Time) bool {
	if !hasProgressDeadline(d) {
		return false
	}
	c := getCondition(*st, appsv1.DeploymentProgressing)
	switch {
	case c == nil || c.Reason == ReasonNewRSAvailable:
		return false
	case c.Reason == ReasonTimedOut:
		return true
	}
	deadline := time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second
	return c.LastUpdateTime.Add(deadline).Before(now)
}

// rolloutStatus is calculateStatus plus the Progressing condition: complete
// (NewReplicaSetAvailable), progressing (ReplicaSetUpdated, lastUpdateTime
// refreshed) or timed out (ProgressDeadlineExceeded), and the
// ReplicaFailure condition promoted from the ReplicaSets.
func rolloutStatus(allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment, now time.Time) appsv1.DeploymentStatus {
	st := calculateStatus(allRSs, newRS, d, now)
	if !hasProgressDeadline(d) {
		removeCondition(&st, appsv1.DeploymentProgressing)
	}
	cur := getCondition(d.Status, appsv1.DeploymentProgressing)
	isComplete := st.Replicas == st.UpdatedReplicas && cur != nil && cur.Reason == ReasonNewRSAvailable
	what := fmt.Sprintf("Deployment %q", d.Name)
	if newRS != nil {
		what = fmt.Sprintf("ReplicaSet %q", newRS.Name)
	}
	if hasProgressDeadline(d) && !isComplete {
		switch {
		case deploymentComplete(d, &st):
			setCondition(&st, newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonNewRSAvailable, what+" has successfully progressed.", now))
		case deploymentProgressing(d, &st):
			// Unlike setCondition, refresh lastUpdateTime even with the same
			// reason: it is the clock the deadline runs on.
			c := newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonReplicaSetUpdated, what+" is progressing.", now)
			if cur != nil {
				if cur.Status == corev1.ConditionTrue {
					c.LastTransitionTime = cur.LastTransitionTime
				}
				removeCondition(&st, appsv1.DeploymentProgressing)
			}
			setCondition(&st, c)
		case deploymentTimedOut(d, &st, now):
			setCondition(&st, newCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse, ReasonTimedOut, what+" has timed out progressing.", now))
		}
	}
	if f := replicaFailure(allRSs, newRS); f != nil {
		setCondition(&st, *f)
	} else {
		removeCondition(&st, appsv1.DeploymentReplicaFailure)
	}
	return st
}

// replicaFailure promotes a ReplicaFailure condition of the new ReplicaSet
// (else of any old one) to the Deployment.
func replicaFailure(allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) *appsv1.DeploymentCondition {
	order := allRSs
	if newRS != nil {
		order = append([]*appsv1.ReplicaSet{newRS}, allRSs...)
	}
	for _, rs := range order {
		if rs == nil {
			continue
		}
		for _, c := range rs.Status.Conditions {
			if c.Type == appsv1.ReplicaSetReplicaFailure {
				return &appsv1.DeploymentCondition{Type: appsv1.DeploymentReplicaFailure, Status: c.Status,
					LastTransitionTime: c.LastTransitionTime, LastUpdateTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message}
			}
		}
	}
	return nil
}

// stuckRequeueAfter is when to look again at a rollout that shows no
// progress, to notice its deadline passing (no event would): the
// Progressing condition's lastUpdateTime plus the deadline. ok is false when
// no check is needed.
func stuckRequeueAfter(d *appsv1.Deployment, st appsv1.DeploymentStatus, now time.Time) (after time.Duration, ok bool) {
	cur := getCondition(d.Status, appsv1.DeploymentProgressing)
	if !hasProgressDeadline(d) || cur == nil || deploymentComplete(d, &st) || cur.Reason == ReasonTimedOut {
		return 0, false
	}
	after = cur.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second).Sub(now)
	return max(after, 0) + time.Second, true
}
