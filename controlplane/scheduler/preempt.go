package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	schedcache "github.com/nodelet/nodelet/controlplane/scheduler/cache"
	"github.com/nodelet/nodelet/controlplane/scheduler/framework"
	"github.com/nodelet/nodelet/controlplane/scheduler/plugins"
)

// ReasonPreemptionByScheduler is the DisruptionTarget condition's reason on
// pods the scheduler preempts, as upstream.
const ReasonPreemptionByScheduler = "PreemptionByScheduler"

// findPreemption decides, on the cycle's snapshot, whether evicting
// lower-priority pods lets pi fit somewhere (nil: no).
func (s *Scheduler) findPreemption(pi *framework.PodInfo, snap *schedcache.Snapshot) *Candidate {
	if len(snap.Nodes) == 0 {
		return nil
	}
	pdbs, err := s.pdbs.List(labels.Everything())
	if err != nil {
		s.log.Info("list pod disruption budgets for preemption", "pod", pi.Key, "err", err)
		return nil
	}
	nodes := s.withNominated(pi, snap.Nodes)
	st := plugins.PreFilter(pi, nodes, snap.HaveAntiAffinityPods)
	s.preemptMu.Lock()
	defer s.preemptMu.Unlock()
	c := SelectPreemption(st, nodes, pdbs, s.preempting[pi.Key].Candidate)
	if c != nil {
		s.preempting[pi.Key] = Nomination{Pod: pi, Candidate: c}
	}
	return c
}

// withNominated returns nodes with the pods preemption nominated to them
// added, so lower-priority pods do not take the room it makes
// (AddNominated decides which).
func (s *Scheduler) withNominated(pi *framework.PodInfo, nodes []*framework.NodeInfo) []*framework.NodeInfo {
	s.preemptMu.Lock()
	defer s.preemptMu.Unlock()
	if len(s.preempting) == 0 {
		return nodes
	}
	noms := make([]Nomination, 0, len(s.preempting))
	for _, n := range s.preempting {
		noms = append(noms, n)
	}
	return AddNominated(pi, nodes, noms)
}

// forgetPreemption drops the preemption recorded for the pod with key:
// it is bound or gone, or its victims could not be evicted.
func (s *Scheduler) forgetPreemption(key string) {
	s.preemptMu.Lock()
	delete(s.preempting, key)
	s.preemptMu.Unlock()
}

// evictVictims carries out a preemption: each victim gets a
// DisruptionTarget condition, is deleted gracefully (guarded by its UID)
// and gets a Preempted event, as upstream's preemption does.
func (s *Scheduler) evictVictims(ctx context.Context, preemptor *corev1.Pod, c *Candidate) error {
	for _, v := range c.Victims {
		if err := s.markDisruptionTarget(ctx, v); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		err := s.client.CoreV1().Pods(v.Namespace).Delete(ctx, v.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &v.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete preemption victim %s/%s: %w", v.Namespace, v.Name, err)
		}
		s.recorder.Eventf(v, corev1.EventTypeNormal, "Preempted", "Preempted by pod %v on node %v", preemptor.UID, c.Node)
	}
	return nil
}

// markDisruptionTarget patches the victim's status with the
// DisruptionTarget condition (a strategic merge on conditions by type).
func (s *Scheduler) markDisruptionTarget(ctx context.Context, v *corev1.Pod) error {
	cond := corev1.PodCondition{
		Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: ReasonPreemptionByScheduler,
		Message:            fmt.Sprintf("%s: preempting to accommodate a higher priority pod", s.cfg.SchedulerName),
		LastTransitionTime: metav1.NewTime(time.Now()),
	}
	return s.patchStatus(ctx, v, map[string]any{"conditions": []corev1.PodCondition{cond}})
}

// patchStatus applies a strategic merge patch to pod's status, guarded by
// the pod's UID.
func (s *Scheduler) patchStatus(ctx context.Context, pod *corev1.Pod, status map[string]any) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": pod.UID}, "status": status})
	if err != nil {
		return fmt.Errorf("encode status patch for %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	_, err = s.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, body, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("patch status of %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// pdbLister is what preemption reads of PodDisruptionBudgets.
type pdbLister interface {
	List(selector labels.Selector) ([]*policyv1.PodDisruptionBudget, error)
}
