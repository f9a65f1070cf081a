package scheduler

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/controlplane/scheduler/queue"
)

// FitError says why no node fits a pod: how many nodes there were and how
// many nodes gave each rejection reason.
type FitError struct {
	NumAllNodes int
	Reasons     map[string]int
	// PreFilterMsg is why no node was even filtered (a pod's claim not
	// found or unbound), upstream's message in place of the reasons.
	PreFilterMsg string
}

// Error formats the message as upstream does, e.g. "0/3 nodes are
// available: 1 node(s) had untolerated taint {a: b}, 2 Insufficient cpu."
// (reasons as "count reason", sorted as strings).
func (e *FitError) Error() string {
	if e.NumAllNodes == 0 {
		return "no nodes available to schedule pods"
	}
	if e.PreFilterMsg != "" {
		return fmt.Sprintf("0/%d nodes are available: %s.", e.NumAllNodes, e.PreFilterMsg)
	}
	parts := make([]string, 0, len(e.Reasons))
	for r, n := range e.Reasons {
		parts = append(parts, fmt.Sprintf("%d %s", n, r))
	}
	sort.Strings(parts)
	return fmt.Sprintf("0/%d nodes are available: %s.", e.NumAllNodes, strings.Join(parts, ", "))
}

// handleUnschedulable parks the pod, records FailedScheduling, carries
// out the preemption c (when not nil) and sets PodScheduled=False with
// the nominated node (asynchronously: no API call on the scheduling path).
// The pod is retried once pods are deleted, the victims among them.
func (s *Scheduler) handleUnschedulable(ctx context.Context, qp *queue.QueuedPod, fe *FitError, c *Candidate) {
	pod := qp.Info.Pod
	msg := fe.Error()
	s.queue.Requeue(qp, true)
	s.log.Debug("pod unschedulable", "pod", qp.Info.Key, "reason", msg)
	s.recorder.Event(pod, corev1.EventTypeWarning, "FailedScheduling", msg)
	if c == nil && conditionSays(pod, msg) {
		return
	}
	s.inflight.Add(1)
	go func() {
		defer s.inflight.Done()
		ctx, cancel := context.WithTimeout(ctx, retryTimeout)
		defer cancel()
		nominated := pod.Status.NominatedNodeName
		if c != nil {
			s.log.Info("preempting", "pod", qp.Info.Key, "node", c.Node, "victims", len(c.Victims))
			if err := s.evictVictims(ctx, pod, c); err != nil {
				s.forgetPreemption(qp.Info.Key)
				s.log.Info("preemption", "pod", qp.Info.Key, "node", c.Node, "err", err)
			} else {
				nominated = c.Node
			}
		}
		if err := s.setUnschedulable(ctx, pod, msg, nominated); err != nil && ctx.Err() == nil {
			s.log.Info("set PodScheduled=False", "pod", qp.Info.Key, "err", err)
		}
	}()
}

// conditionSays reports whether pod already carries PodScheduled=False
// Unschedulable with msg (then there is nothing to write).
func conditionSays(pod *corev1.Pod, msg string) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable && c.Message == msg
		}
	}
	return false
}

// setUnschedulable patches the PodScheduled condition (a strategic merge
// on conditions keyed by type, guarded by the pod's UID) and the
// nominated node, if any.
func (s *Scheduler) setUnschedulable(ctx context.Context, pod *corev1.Pod, msg, nominated string) error {
	now := metav1.NewTime(time.Now())
	cond := corev1.PodCondition{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: msg,
		LastTransitionTime: now, LastProbeTime: metav1.Time{},
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			cond.LastTransitionTime = c.LastTransitionTime
		}
	}
	status := map[string]any{"conditions": []corev1.PodCondition{cond}}
	if nominated != "" {
		status["nominatedNodeName"] = nominated
	}
	return s.patchStatus(ctx, pod, status)
}
