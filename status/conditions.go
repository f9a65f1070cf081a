package status

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/runtime"
)

// Condition reasons of upstream's kubelet.
const (
	ReasonUnknownContainerStatuses = "UnknownContainerStatuses"
	ReasonPodCompleted             = "PodCompleted"
	ReasonPodFailed                = "PodFailed"
	ReasonContainersNotReady       = "ContainersNotReady"
	ReasonContainersNotInitialized = "ContainersNotInitialized"
	ReasonReadinessGatesNotReady   = "ReadinessGatesNotReady"
)

// ownedByNodelet are the condition types the node sets; others (set by
// controllers, readiness gates) are carried over untouched.
func ownedByNodelet(t corev1.PodConditionType) bool {
	switch t {
	case corev1.PodScheduled, corev1.PodReady, corev1.PodInitialized,
		corev1.ContainersReady, corev1.PodReadyToStartContainers:
		return true
	}
	return false
}

// conditions returns the pod's conditions: the ones owned by others first
// (from pod.Status), then PodReadyToStartContainers, Initialized, Ready,
// ContainersReady and PodScheduled, each keeping its lastTransitionTime
// from old while its status is unchanged.
func conditions(pod *corev1.Pod, rs *runtime.PodStatus, s *corev1.PodStatus, old corev1.PodStatus, now time.Time) []corev1.PodCondition {
	out := make([]corev1.PodCondition, 0, len(pod.Status.Conditions)+5)
	for _, c := range pod.Status.Conditions {
		if !ownedByNodelet(c.Type) {
			out = append(out, c)
		}
	}
	all := append(append([]corev1.ContainerStatus{}, s.InitContainerStatuses...), s.ContainerStatuses...)
	changed, _, _ := runtime.SandboxChanged(pod, rs)
	readyToStart := corev1.PodCondition{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionFalse}
	if !changed {
		readyToStart.Status = corev1.ConditionTrue
	}
	owned := []corev1.PodCondition{
		readyToStart,
		initializedCondition(&pod.Spec, all, s.Phase),
		readyCondition(&pod.Spec, out, all, s.Phase),
		containersReadyCondition(&pod.Spec, all, s.Phase),
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
	}
	for _, c := range owned {
		c.LastTransitionTime = metav1.NewTime(now)
		if prev := findCondition(old.Conditions, c.Type); prev != nil && prev.Status == c.Status {
			c.LastTransitionTime = prev.LastTransitionTime
		}
		out = append(out, c)
	}
	return out
}

func findCondition(conds []corev1.PodCondition, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// containersReadyCondition is upstream's GenerateContainersReadyCondition.
func containersReadyCondition(spec *corev1.PodSpec, statuses []corev1.ContainerStatus, phase corev1.PodPhase) corev1.PodCondition {
	cond := corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionFalse}
	if statuses == nil {
		cond.Reason = ReasonUnknownContainerStatuses
		return cond
	}
	unknown, unready := notReady(spec.Containers, statuses)
	if phase == corev1.PodSucceeded && len(unknown) == 0 {
		cond.Reason = ReasonPodCompleted
		return cond
	}
	if phase == corev1.PodFailed {
		cond.Reason = ReasonPodFailed
		return cond
	}
	var msgs []string
	if len(unknown) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with unknown status: %s", unknown))
	}
	if len(unready) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with unready status: %s", unready))
	}
	if len(msgs) > 0 {
		cond.Reason = ReasonContainersNotReady
		cond.Message = strings.Join(msgs, ", ")
		return cond
	}
	cond.Status = corev1.ConditionTrue
	return cond
}

// readyCondition is upstream's GeneratePodReadyCondition: ContainersReady
// and every readiness gate's condition True.
func readyCondition(spec *corev1.PodSpec, others []corev1.PodCondition, statuses []corev1.ContainerStatus, phase corev1.PodPhase) corev1.PodCondition {
	cr := containersReadyCondition(spec, statuses, phase)
	if cr.Status != corev1.ConditionTrue {
		return corev1.PodCondition{Type: corev1.PodReady, Status: cr.Status, Reason: cr.Reason, Message: cr.Message}
	}
	var msgs []string
	for _, rg := range spec.ReadinessGates {
		c := findCondition(others, rg.ConditionType)
		switch {
		case c == nil:
			msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", string(rg.ConditionType)))
		case c.Status != corev1.ConditionTrue:
			msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", string(rg.ConditionType), c.Status))
		}
	}
	if len(msgs) > 0 {
		return corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse,
			Reason: ReasonReadinessGatesNotReady, Message: strings.Join(msgs, ", ")}
	}
	return corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue}
}

// initializedCondition is upstream's GeneratePodInitializedCondition.
func initializedCondition(spec *corev1.PodSpec, statuses []corev1.ContainerStatus, phase corev1.PodPhase) corev1.PodCondition {
	cond := corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionFalse}
	if statuses == nil && len(spec.InitContainers) > 0 {
		cond.Reason = ReasonUnknownContainerStatuses
		return cond
	}
	unknown, incomplete := notReady(spec.InitContainers, statuses)
	if phase == corev1.PodSucceeded && len(unknown) == 0 {
		return corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, Reason: ReasonPodCompleted}
	}
	if anyAppContainerStarted(spec, statuses) {
		return corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}
	}
	var msgs []string
	if len(unknown) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with unknown status: %s", unknown))
	}
	if len(incomplete) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with incomplete status: %s", incomplete))
	}
	if len(msgs) > 0 {
		cond.Reason = ReasonContainersNotInitialized
		cond.Message = strings.Join(msgs, ", ")
		return cond
	}
	cond.Status = corev1.ConditionTrue
	return cond
}

// notReady splits containers into those without a status and those whose
// status is not ready (for init containers: not completed).
func notReady(containers []corev1.Container, statuses []corev1.ContainerStatus) (unknown, unready []string) {
	for _, c := range containers {
		cs, ok := find(statuses, c.Name)
		switch {
		case !ok:
			unknown = append(unknown, c.Name)
		case !cs.Ready:
			unready = append(unready, c.Name)
		}
	}
	return unknown, unready
}
