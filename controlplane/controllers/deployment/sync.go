package deployment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"

	"github.com/nodelet/nodelet/controlplane/controllers/controllerref"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// Reconcile syncs the Deployment named by key ("namespace/name").
//
// Order, as upstream: adopt/release ReplicaSets; a Deployment being deleted
// only gets its status refreshed; a paused one or a scaling event (the
// replicas changed since the ReplicaSets were sized) is only scaled; else
// the strategy rolls out.
func (c *Controller) Reconcile(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	cached, err := c.dLister.Deployments(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get deployment %s: %w", key, err)
	}
	d := cached.DeepCopy()
	if reflect.DeepEqual(d.Spec.Selector, &metav1.LabelSelector{}) {
		c.recorder.Eventf(d, corev1.EventTypeWarning, "SelectingAll", "This deployment is selecting all pods. A non-empty selector is required.")
		if d.Status.ObservedGeneration < d.Generation {
			d.Status.ObservedGeneration = d.Generation
			return c.updateStatus(ctx, d)
		}
		return nil
	}
	rsList, err := c.claimReplicaSets(ctx, d)
	if err != nil {
		return err
	}
	if d.DeletionTimestamp != nil {
		newRS := findNewReplicaSet(d, rsList)
		return c.syncStatus(ctx, d, rsList, newRS)
	}
	if err := c.checkPausedConditions(ctx, d); err != nil {
		return err
	}
	newRS, oldRSs, err := c.syncRevisions(ctx, d, rsList)
	if err != nil {
		return err
	}
	if d.Spec.Paused || isScalingEvent(d, newRS, oldRSs) {
		return c.sync(ctx, d, newRS, oldRSs)
	}
	switch d.Spec.Strategy.Type {
	case appsv1.RecreateDeploymentStrategyType:
		return c.rolloutRecreate(ctx, d, newRS, oldRSs, rsList)
	case appsv1.RollingUpdateDeploymentStrategyType:
		return c.rolloutRolling(ctx, d, newRS, oldRSs)
	}
	return fmt.Errorf("deployment %s: unexpected strategy %q", key, d.Spec.Strategy.Type)
}

// isScalingEvent: some active ReplicaSet was sized for a different
// Deployment size than the current one.
func isScalingEvent(d *appsv1.Deployment, newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet) bool {
	for _, rs := range filterActive(append(append([]*appsv1.ReplicaSet(nil), oldRSs...), newRS)) {
		if desired, ok := intAnnotation(rs, DesiredReplicasAnnotation); ok && desired != deploymentReplicas(d) {
			return true
		}
	}
	return false
}

// sync only scales (paused Deployments and scaling events), cleaning up
// history while paused, then refreshes the status.
func (c *Controller) sync(ctx context.Context, d *appsv1.Deployment, newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet) error {
	if err := c.scale(ctx, d, newRS, oldRSs); err != nil {
		return err
	}
	if d.Spec.Paused {
		if err := c.cleanup(ctx, d, oldRSs); err != nil {
			return err
		}
	}
	return c.syncStatus(ctx, d, append(oldRSs, newRS), newRS)
}

// checkPausedConditions records pausing and resuming in the Progressing
// condition, so time spent paused does not count against the deadline.
func (c *Controller) checkPausedConditions(ctx context.Context, d *appsv1.Deployment) error {
	if !hasProgressDeadline(d) {
		return nil
	}
	cond := getCondition(d.Status, appsv1.DeploymentProgressing)
	if cond != nil && cond.Reason == ReasonTimedOut {
		return nil // do not hide a reported lack of progress
	}
	paused := cond != nil && cond.Reason == ReasonPaused
	switch {
	case d.Spec.Paused && !paused:
		setCondition(&d.Status, newCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, ReasonPaused, "Deployment is paused", c.now()))
	case !d.Spec.Paused && paused:
		setCondition(&d.Status, newCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, ReasonResumed, "Deployment is resumed", c.now()))
	default:
		return nil
	}
	return c.updateStatus(ctx, d)
}

// syncRevisions finds the new ReplicaSet (template equal to the
// Deployment's) and the old ones. An existing new ReplicaSet gets the next
// revision if it is behind (a rollback), the Deployment's annotations and
// minReadySeconds; the Deployment gets its revision. It never creates.
func (c *Controller) syncRevisions(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) (*appsv1.ReplicaSet, []*appsv1.ReplicaSet, error) {
	existing := findNewReplicaSet(d, rsList)
	oldRSs := oldReplicaSets(rsList, existing)
	if existing == nil {
		return nil, oldRSs, nil
	}
	rs := existing.DeepCopy()
	annotationsChanged := setNewReplicaSetAnnotations(d, rs, maxRevision(oldRSs)+1, true)
	if annotationsChanged || rs.Spec.MinReadySeconds != d.Spec.MinReadySeconds {
		rs.Spec.MinReadySeconds = d.Spec.MinReadySeconds
		updated, err := c.client.AppsV1().ReplicaSets(rs.Namespace).Update(ctx, rs, metav1.UpdateOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("update revision of replicaset %s/%s: %w", rs.Namespace, rs.Name, err)
		}
		rs = updated
	}
	if err := c.setDeploymentRevision(ctx, d, rs.Annotations[RevisionAnnotation]); err != nil {
		return nil, nil, err
	}
	// A Deployment that never had a Progressing condition starts its
	// progress clock when its new ReplicaSet is first noticed.
	if hasProgressDeadline(d) && getCondition(d.Status, appsv1.DeploymentProgressing) == nil {
		setCondition(&d.Status, newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonFoundNewReplicaSet,
			fmt.Sprintf("Found new replica set %q", rs.Name), c.now()))
		if err := c.updateStatus(ctx, d); err != nil {
			return nil, nil, err
		}
	}
	return rs, oldRSs, nil
}

// createNewReplicaSet creates "<deployment>-<hash>" sized by the strategy.
// A name taken by a ReplicaSet with another template is a hash collision:
// collisionCount is bumped so the next attempt hashes differently.
func (c *Controller) createNewReplicaSet(ctx context.Context, d *appsv1.Deployment, oldRSs []*appsv1.ReplicaSet) (*appsv1.ReplicaSet, error) {
	hash := ComputeHash(&d.Spec.Template, d.Status.CollisionCount)
	template := *d.Spec.Template.DeepCopy()
	template.Labels = withLabel(d.Spec.Template.Labels, appsv1.DefaultDeploymentUniqueLabelKey, hash)
	selector := d.Spec.Selector.DeepCopy()
	selector.MatchLabels = withLabel(selector.MatchLabels, appsv1.DefaultDeploymentUniqueLabelKey, hash)
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: d.Name + "-" + hash, Namespace: d.Namespace, Labels: template.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, controllerKind)},
		},
		Spec: appsv1.ReplicaSetSpec{Replicas: new(int32), MinReadySeconds: d.Spec.MinReadySeconds, Selector: selector, Template: template},
	}
	n, err := newRSNewReplicas(d, append(append([]*appsv1.ReplicaSet(nil), oldRSs...), rs), rs)
	if err != nil {
		return nil, err
	}
	*rs.Spec.Replicas = n
	newRevision := maxRevision(oldRSs) + 1
	setNewReplicaSetAnnotations(d, rs, newRevision, false)

	created, err := c.client.AppsV1().ReplicaSets(d.Namespace).Create(ctx, rs, metav1.CreateOptions{})
	alreadyExists := apierrors.IsAlreadyExists(err)
	switch {
	case alreadyExists:
		existing, gerr := c.client.AppsV1().ReplicaSets(d.Namespace).Get(ctx, rs.Name, metav1.GetOptions{})
		if gerr != nil {
			return nil, fmt.Errorf("get existing replicaset %s/%s: %w", d.Namespace, rs.Name, gerr)
		}
		if ref := metav1.GetControllerOf(existing); ref != nil && ref.UID == d.UID && equalIgnoreHash(&d.Spec.Template, &existing.Spec.Template) {
			created = existing // ours, from a sync whose result the cache had not shown yet
			break
		}
		cc := int32(0)
		if d.Status.CollisionCount != nil {
			cc = *d.Status.CollisionCount
		}
		cc++
		d.Status.CollisionCount = &cc
		if uerr := c.updateStatus(ctx, d); uerr != nil {
			return nil, errors.Join(err, uerr)
		}
		c.log.Info("hash collision, bumped collisionCount", "deployment", d.Namespace+"/"+d.Name, "collisionCount", cc)
		return nil, fmt.Errorf("create replicaset %s/%s: %w", d.Namespace, rs.Name, err)
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return nil, err
	case err != nil:
		msg := fmt.Sprintf("Failed to create new replica set %q: %v", rs.Name, err)
		if hasProgressDeadline(d) {
			setCondition(&d.Status, newCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse, ReasonFailedRSCreate, msg, c.now()))
			_ = c.updateStatus(ctx, d) // the create error is the one to report
		}
		c.recorder.Event(d, corev1.EventTypeWarning, ReasonFailedRSCreate, msg)
		return nil, fmt.Errorf("create replicaset %s/%s: %w", d.Namespace, rs.Name, err)
	}
	if !alreadyExists && n > 0 {
		c.recorder.Eventf(d, corev1.EventTypeNormal, "ScalingReplicaSet", "Scaled up replica set %s from 0 to %d", created.Name, n)
	}
	if err := c.setDeploymentRevision(ctx, d, strconv.FormatInt(newRevision, 10)); err != nil {
		return nil, err
	}
	if !alreadyExists && hasProgressDeadline(d) {
		setCondition(&d.Status, newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonNewReplicaSetCreated,
			fmt.Sprintf("Created new replica set %q", created.Name), c.now()))
		if err := c.updateStatus(ctx, d); err != nil {
			return nil, err
		}
	}
	return created, nil
}

func withLabel(in map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(in)+1)
	for key, val := range in {
		out[key] = val
	}
	out[k] = v
	return out
}

// setDeploymentRevision records rev in the Deployment's revision annotation.
// It patches metadata rather than riding on the status update: our API
// server, unlike upstream's, keeps metadata unchanged on status writes.
func (c *Controller) setDeploymentRevision(ctx context.Context, d *appsv1.Deployment, rev string) error {
	if rev == "" || d.Annotations[RevisionAnnotation] == rev {
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{RevisionAnnotation: rev}}})
	updated, err := c.client.AppsV1().Deployments(d.Namespace).Patch(ctx, d.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("set revision of deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	d.Annotations = updated.Annotations
	d.ResourceVersion = updated.ResourceVersion
	return nil
}

// updateStatus writes d's status and keeps d's resourceVersion current, so
// several writes in one sync do not conflict with each other.
func (c *Controller) updateStatus(ctx context.Context, d *appsv1.Deployment) error {
	updated, err := c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("update status of deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	d.ResourceVersion = updated.ResourceVersion
	return nil
}

// syncStatus writes the counts and the Available condition if they changed.
func (c *Controller) syncStatus(ctx context.Context, d *appsv1.Deployment, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) error {
	st := calculateStatus(allRSs, newRS, d, c.now())
	if reflect.DeepEqual(d.Status, st) {
		return nil
	}
	d.Status = st
	return c.updateStatus(ctx, d)
}

// syncRolloutStatus also maintains the Progressing condition, and requeues a
// rollout without progress for when its deadline passes.
func (c *Controller) syncRolloutStatus(ctx context.Context, d *appsv1.Deployment, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) error {
	st := rolloutStatus(allRSs, newRS, d, c.now())
	if reflect.DeepEqual(d.Status, st) {
		if after, ok := stuckRequeueAfter(d, st, c.now()); ok {
			key, _ := cache.MetaNamespaceKeyFunc(d)
			c.queue.AddAfter(key, after)
		}
		return nil
	}
	d.Status = st
	return c.updateStatus(ctx, d)
}

// claimReplicaSets returns the ReplicaSets d controls after adopting
// matching orphans and releasing owned ones that no longer match.
func (c *Controller) claimReplicaSets(ctx context.Context, d *appsv1.Deployment) ([]*appsv1.ReplicaSet, error) {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("deployment %s/%s selector: %w", d.Namespace, d.Name, err)
	}
	all, err := c.rsLister.ReplicaSets(d.Namespace).List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list replicasets: %w", err)
	}
	claimer := &controllerref.Claimer[*appsv1.ReplicaSet]{
		Owner: d, OwnerGVK: controllerKind, Selector: sel,
		Fresh: func(ctx context.Context) (metav1.Object, error) {
			return c.client.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
		},
		Patch: func(ctx context.Context, rs *appsv1.ReplicaSet, patch []byte) error {
			_, err := c.client.AppsV1().ReplicaSets(rs.Namespace).Patch(ctx, rs.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
			return err
		},
	}
	return claimer.Claim(ctx, all)
}

// podsByReplicaSet groups d's pods by the ReplicaSet (of rsList) that
// controls them.
func (c *Controller) podsByReplicaSet(d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) (map[types.UID][]*corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, err
	}
	pods, err := c.podLister.Pods(d.Namespace).List(sel)
	if err != nil {
		return nil, err
	}
	m := make(map[types.UID][]*corev1.Pod, len(rsList))
	for _, rs := range rsList {
		m[rs.UID] = nil
	}
	for _, p := range pods {
		if ref := metav1.GetControllerOf(p); ref != nil {
			if _, ok := m[ref.UID]; ok {
				m[ref.UID] = append(m[ref.UID], p)
			}
		}
	}
	return m, nil
}
