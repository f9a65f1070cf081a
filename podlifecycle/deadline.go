package podlifecycle

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A pod's activeDeadlineSeconds, as upstream's kubelet enforces it (its
// activeDeadlineHandler): counted from the pod's status.startTime; once
// past, every status computed for the pod is Failed with this reason and
// message, and the pod is stopped with its grace period.
const (
	ReasonDeadlineExceeded  = "DeadlineExceeded"
	MessageDeadlineExceeded = "Pod was active on the node longer than the specified deadline"
)

// activeDeadline reports whether the pod started at start has run past its
// activeDeadlineSeconds at now, and else how long it has left (0 for a pod
// without a deadline or a start time).
func activeDeadline(pod *corev1.Pod, start *metav1.Time, now time.Time) (exceeded bool, left time.Duration) {
	if pod.Spec.ActiveDeadlineSeconds == nil || start == nil || start.IsZero() {
		return false, 0
	}
	left = start.Add(time.Duration(*pod.Spec.ActiveDeadlineSeconds) * time.Second).Sub(now)
	if left <= 0 {
		return true, 0
	}
	return false, left
}

// startTime is the pod's start time as the node last computed it, else as
// the API has it.
func (s *Syncer) startTime(pod *corev1.Pod) *metav1.Time {
	if st, ok := s.cfg.Status.GetPodStatus(pod.UID); ok && st.StartTime != nil {
		return st.StartTime
	}
	return pod.Status.StartTime
}

// failPastDeadline makes st Failed/DeadlineExceeded when the pod, started
// at start, has run past its deadline.
func failPastDeadline(pod *corev1.Pod, start *metav1.Time, st *corev1.PodStatus, now time.Time) {
	if exceeded, _ := activeDeadline(pod, start, now); exceeded {
		st.Phase, st.Reason, st.Message = corev1.PodFailed, ReasonDeadlineExceeded, MessageDeadlineExceeded
	}
}
