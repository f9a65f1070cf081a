package deployment

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// rolloutRolling makes one step of a rolling update: grow the new
// ReplicaSet as far as maxSurge allows; if it could not grow, shrink old
// ones as far as maxUnavailable allows; once complete, trim history. Each
// step waits for the ReplicaSets' status to move before the next.
func (c *Controller) rolloutRolling(ctx context.Context, d *appsv1.Deployment, newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet) error {
	if newRS == nil {
		var err error
		if newRS, err = c.createNewReplicaSet(ctx, d, oldRSs); err != nil {
			return err
		}
	}
	allRSs := append(append([]*appsv1.ReplicaSet(nil), oldRSs...), newRS)
	if want := deploymentReplicas(d); specReplicas(newRS) != want {
		target := want
		if specReplicas(newRS) < want {
			var err error
			if target, err = newRSNewReplicas(d, allRSs, newRS); err != nil {
				return err
			}
		}
		scaled, _, err := c.scaleAndRecord(ctx, newRS, target, d)
		if err != nil {
			return err
		}
		if scaled {
			return c.syncRolloutStatus(ctx, d, allRSs, newRS)
		}
	}
	plan := rollingScaleDownPlan(d, allRSs, filterActive(oldRSs), newRS)
	for _, s := range plan {
		if _, _, err := c.scaleAndRecord(ctx, s.rs, s.replicas, d); err != nil {
			return err
		}
	}
	if len(plan) > 0 {
		return c.syncRolloutStatus(ctx, d, allRSs, newRS)
	}
	if deploymentComplete(d, &d.Status) {
		if err := c.cleanup(ctx, d, oldRSs); err != nil {
			return err
		}
	}
	return c.syncRolloutStatus(ctx, d, allRSs, newRS)
}

// rolloutRecreate scales every old ReplicaSet to zero, waits until none of
// their pods runs, and only then creates (or scales up) the new one.
func (c *Controller) rolloutRecreate(ctx context.Context, d *appsv1.Deployment, newRS *appsv1.ReplicaSet, oldRSs, rsList []*appsv1.ReplicaSet) error {
	allRSs := append(append([]*appsv1.ReplicaSet(nil), oldRSs...), newRS)
	scaledDown := false
	for _, rs := range filterActive(oldRSs) {
		scaled, _, err := c.scaleAndRecord(ctx, rs, 0, d)
		if err != nil {
			return err
		}
		scaledDown = scaledDown || scaled
	}
	if scaledDown {
		return c.syncRolloutStatus(ctx, d, allRSs, newRS)
	}
	pods, err := c.podsByReplicaSet(d, rsList)
	if err != nil {
		return fmt.Errorf("list pods of deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	if oldPodsRunning(newRS, oldRSs, pods) {
		return c.syncRolloutStatus(ctx, d, allRSs, newRS)
	}
	if newRS == nil {
		if newRS, err = c.createNewReplicaSet(ctx, d, oldRSs); err != nil {
			return err
		}
		allRSs = append(append([]*appsv1.ReplicaSet(nil), oldRSs...), newRS)
	}
	if _, _, err := c.scaleAndRecord(ctx, newRS, deploymentReplicas(d), d); err != nil {
		return err
	}
	if deploymentComplete(d, &d.Status) {
		if err := c.cleanup(ctx, d, oldRSs); err != nil {
			return err
		}
	}
	return c.syncRolloutStatus(ctx, d, allRSs, newRS)
}

// oldPodsRunning reports whether any old ReplicaSet still has pods that may
// run: by status count, or any pod of theirs not yet Succeeded or Failed
// (terminating pods included: their containers may still be running).
func oldPodsRunning(newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet, pods map[types.UID][]*corev1.Pod) bool {
	if sumStatus(oldRSs, statusReplicas) > 0 {
		return true
	}
	for uid, list := range pods {
		if newRS != nil && newRS.UID == uid {
			continue
		}
		for _, p := range list {
			if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				return true
			}
		}
	}
	return false
}

// scale resizes ReplicaSets for a changed Deployment size (or while paused):
// a lone active ReplicaSet takes the whole size; with a saturated new one
// the old ones go to zero; otherwise a rolling Deployment scales all active
// ReplicaSets proportionally.
func (c *Controller) scale(ctx context.Context, d *appsv1.Deployment, newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet) error {
	if rs := findActiveOrLatest(newRS, oldRSs); rs != nil {
		if specReplicas(rs) == deploymentReplicas(d) {
			return nil
		}
		_, _, err := c.scaleAndRecord(ctx, rs, deploymentReplicas(d), d)
		return err
	}
	if isSaturated(d, newRS) {
		for _, rs := range filterActive(oldRSs) {
			if _, _, err := c.scaleAndRecord(ctx, rs, 0, d); err != nil {
				return err
			}
		}
		return nil
	}
	if !isRollingUpdate(d) {
		return nil
	}
	plan, op := proportionalScalePlan(d, filterActive(append(append([]*appsv1.ReplicaSet(nil), oldRSs...), newRS)))
	for _, s := range plan {
		// Every active ReplicaSet is written, even at the same size, to
		// record the new desired/max replicas annotations.
		if _, _, err := c.scaleReplicaSet(ctx, s.rs, s.replicas, d, op); err != nil {
			return err
		}
	}
	return nil
}

// scaleAndRecord scales rs to n if it is not there yet.
func (c *Controller) scaleAndRecord(ctx context.Context, rs *appsv1.ReplicaSet, n int32, d *appsv1.Deployment) (bool, *appsv1.ReplicaSet, error) {
	if specReplicas(rs) == n {
		return false, rs, nil
	}
	op := "down"
	if specReplicas(rs) < n {
		op = "up"
	}
	return c.scaleReplicaSet(ctx, rs, n, d, op)
}

// scaleReplicaSet writes rs's size n and the Deployment's desired and max
// replicas annotations, emitting ScalingReplicaSet when the size changed.
func (c *Controller) scaleReplicaSet(ctx context.Context, rs *appsv1.ReplicaSet, n int32, d *appsv1.Deployment, op string) (bool, *appsv1.ReplicaSet, error) {
	want, maxReplicas := deploymentReplicas(d), deploymentReplicas(d)+maxSurge(d)
	sizeChanged := specReplicas(rs) != n
	if !sizeChanged && !replicasAnnotationsNeedUpdate(rs, want, maxReplicas) {
		return false, rs, nil
	}
	from := specReplicas(rs)
	cp := rs.DeepCopy()
	cp.Spec.Replicas = &n
	setReplicasAnnotations(cp, want, maxReplicas)
	updated, err := c.client.AppsV1().ReplicaSets(cp.Namespace).Update(ctx, cp, metav1.UpdateOptions{})
	if err != nil {
		return false, rs, fmt.Errorf("scale replicaset %s/%s to %d: %w", rs.Namespace, rs.Name, n, err)
	}
	if sizeChanged {
		c.recorder.Eventf(d, corev1.EventTypeNormal, "ScalingReplicaSet", "Scaled %s replica set %s from %d to %d", op, rs.Name, from, n)
	}
	return sizeChanged, updated, nil
}

// cleanup deletes the oldest zero-size ReplicaSets beyond
// revisionHistoryLimit.
func (c *Controller) cleanup(ctx context.Context, d *appsv1.Deployment, oldRSs []*appsv1.ReplicaSet) error {
	for _, rs := range cleanupPlan(d, oldRSs) {
		err := c.client.AppsV1().ReplicaSets(rs.Namespace).Delete(ctx, rs.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			// Stop at the first failure: the server may be overloaded.
			return fmt.Errorf("delete old replicaset %s/%s: %w", rs.Namespace, rs.Name, err)
		}
	}
	return nil
}
