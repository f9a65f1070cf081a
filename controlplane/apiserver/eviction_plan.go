package apiserver

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	pdbhelper "k8s.io/component-helpers/apps/poddisruptionbudget"
)

// The decisions of pods/eviction, as upstream's
// pkg/registry/core/pod/storage/eviction.go makes them; eviction.go acts
// on them.

// maxDisruptedPodSize is upstream's bound on status.disruptedPods: beyond
// it evictions wait for the disruption controller to catch up.
const maxDisruptedPodSize = 2000

// evictionKind is what an eviction does with a pod.
type evictionKind int

const (
	// evictIgnoreBudget: the pod is pending, terminal or being deleted
	// already; it goes without a look at budgets (conflicts are retried).
	evictIgnoreBudget evictionKind = iota
	// evictNoBudget: no budget covers the pod.
	evictNoBudget
	// evictUnhealthy: the pod is not ready and its budget lets unhealthy
	// pods go without counting them; deleted only if still as read.
	evictUnhealthy
	// evictDecrement: take one disruption from the budget, then delete.
	evictDecrement
	// evictRefuse: more than one budget covers the pod.
	evictRefuse
)

// evictionPlan is the decision for one pod.
type evictionPlan struct {
	kind evictionKind
	// pin: delete with the pod's resourceVersion as precondition, so the
	// pod cannot have become healthy in between.
	pin bool
	// pdb is the budget covering the pod (nil when none).
	pdb *policyv1.PodDisruptionBudget
	err error
}

// planEviction decides how pod is evicted given the budgets of its
// namespace.
func planEviction(pod *corev1.Pod, pdbs []policyv1.PodDisruptionBudget) evictionPlan {
	if canIgnorePDB(pod) {
		return evictionPlan{kind: evictIgnoreBudget, pin: shouldEnforceResourceVersion(pod)}
	}
	matching := matchingPDBs(pod, pdbs)
	switch len(matching) {
	case 0:
		return evictionPlan{kind: evictNoBudget}
	case 1:
	default:
		return evictionPlan{kind: evictRefuse, err: &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Reason: metav1.StatusReasonInternalError,
			Message: "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."}}}
	}
	pdb := matching[0]
	if !podReady(pod) {
		if p := pdb.Spec.UnhealthyPodEvictionPolicy; p != nil && *p == policyv1.AlwaysAllow {
			return evictionPlan{kind: evictUnhealthy, pin: true, pdb: pdb}
		}
		if pdb.Status.CurrentHealthy >= pdb.Status.DesiredHealthy && pdb.Status.DesiredHealthy > 0 {
			return evictionPlan{kind: evictUnhealthy, pin: true, pdb: pdb}
		}
	}
	return evictionPlan{kind: evictDecrement, pdb: pdb}
}

// canIgnorePDB: a pending or terminal pod, or one being deleted, has
// disrupted nothing a budget protects.
func canIgnorePDB(pod *corev1.Pod) bool {
	switch pod.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed, corev1.PodPending:
		return true
	}
	return pod.DeletionTimestamp != nil
}

func shouldEnforceResourceVersion(pod *corev1.Pod) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	return pod.DeletionTimestamp == nil
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// matchingPDBs returns the budgets of the pod's namespace whose selector
// matches it (an invalid selector matches nothing).
func matchingPDBs(pod *corev1.Pod, pdbs []policyv1.PodDisruptionBudget) []*policyv1.PodDisruptionBudget {
	var out []*policyv1.PodDisruptionBudget
	for i := range pdbs {
		pdb := &pdbs[i]
		if pdb.Namespace != pod.Namespace {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		out = append(out, pdb)
	}
	return out
}

// decrementPDB returns pdb with one disruption taken for podName at now
// (recorded in status.disruptedPods unless dryRun), or why the budget
// allows none: 429 TooManyRequests naming the budget, or 403 when the
// budget is negative or has too many evictions unconfirmed.
func decrementPDB(pdb *policyv1.PodDisruptionBudget, podName string, now time.Time, dryRun bool) (*policyv1.PodDisruptionBudget, error) {
	if pdb.Status.ObservedGeneration < pdb.Generation {
		return nil, tooManyRequests(fmt.Sprintf("The disruption budget %s is still being processed by the server.", pdb.Name), 10)
	}
	if pdb.Status.DisruptionsAllowed < 0 {
		return nil, budgetForbidden(pdb.Name, "pdb disruptions allowed is negative",
			"The disruption budget %s does not allow evicting pods currently: pdb disruptions allowed is negative")
	}
	if len(pdb.Status.DisruptedPods) > maxDisruptedPodSize {
		return nil, budgetForbidden(pdb.Name, "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
			"The disruption budget %s does not allow evicting pods currently: too many pending evictions not confirmed by PDB controller")
	}
	if pdb.Status.DisruptionsAllowed == 0 {
		return nil, tooManyRequests(noDisruptionMessage(pdb), 0)
	}
	out := pdb.DeepCopy()
	out.Status.DisruptionsAllowed--
	if out.Status.DisruptionsAllowed == 0 {
		pdbhelper.UpdateDisruptionAllowedCondition(out)
	}
	if dryRun {
		return out, nil
	}
	if out.Status.DisruptedPods == nil {
		out.Status.DisruptedPods = map[string]metav1.Time{}
	}
	out.Status.DisruptedPods[podName] = metav1.NewTime(now)
	return out, nil
}

// noDisruptionMessage explains a budget that allows no disruption, in
// upstream's words.
func noDisruptionMessage(pdb *policyv1.PodDisruptionBudget) string {
	c := meta.FindStatusCondition(pdb.Status.Conditions, policyv1.DisruptionAllowedCondition)
	failed := c != nil && c.Status == metav1.ConditionFalse && c.Message != ""
	switch {
	case failed && c.Reason == policyv1.SyncFailedReason:
		return fmt.Sprintf("The disruption budget %s does not allow evicting pods currently because it failed sync: %s", pdb.Name, c.Message)
	case pdb.Status.CurrentHealthy <= pdb.Status.DesiredHealthy:
		return fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently", pdb.Name, pdb.Status.DesiredHealthy, pdb.Status.CurrentHealthy)
	case failed:
		return fmt.Sprintf("The disruption budget %s does not allow evicting pods currently (%s): %s", pdb.Name, c.Reason, c.Message)
	}
	return fmt.Sprintf("The disruption budget %s does not allow evicting pods currently", pdb.Name)
}

// tooManyRequests is upstream's refusal: 429 with a DisruptionBudget cause.
func tooManyRequests(cause string, retryAfter int) error {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", retryAfter)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause, Message: cause})
	return err
}

func budgetForbidden(name, reason, causeFormat string) error {
	err := apierrors.NewForbidden(policyv1.Resource("poddisruptionbudget"), name, errors.New(reason))
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
		Type: policyv1.DisruptionBudgetCause, Message: fmt.Sprintf(causeFormat, name)})
	return err
}
