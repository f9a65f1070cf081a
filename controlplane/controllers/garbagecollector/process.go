package garbagecollector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

// errRefsChanged: the dependent's owners changed between the decision and
// the delete; the item is looked at again.
var errRefsChanged = errors.New("garbagecollector: ownerReferences changed during deletion")

// processAttemptToDelete looks at one object: a virtual owner is verified
// to exist, a foreground-deleting owner is finished once its blocking
// dependents are gone, and a dependent is deleted or loses references
// according to planDependent.
func (c *Controller) processAttemptToDelete(ctx context.Context, uid types.UID) error {
	v, ok := c.graph.view(uid)
	if !ok {
		return nil
	}
	latest, err := c.getObject(ctx, v.id)
	if apierrors.IsNotFound(err) || (err == nil && latest.UID != uid) {
		// Gone (or replaced by a namesake): its dependents lost an owner.
		c.apply(c.graph.forget(uid))
		return nil
	}
	if err != nil {
		return err
	}
	if !v.observed {
		return errNotObserved
	}
	if latest.DeletionTimestamp != nil {
		if hasFinalizer(latest, metav1.FinalizerDeleteDependents) {
			return c.processDeletingDependents(ctx, v)
		}
		return nil // on its way out; its dependents are handled when it goes
	}
	if len(latest.OwnerReferences) == 0 {
		return nil
	}
	facts := dependentFacts{refs: latest.OwnerReferences, states: map[types.UID]ownerState{},
		finalizers: latest.Finalizers, hasDependents: len(v.dependents) > 0}
	for _, d := range v.dependents {
		facts.dependentDeletingDependents = facts.dependentDeletingDependents || d.deletingDependents
	}
	for _, ref := range latest.OwnerReferences {
		st, err := c.ownerState(ctx, latest, ref)
		if err != nil {
			return err
		}
		facts.states[ref.UID] = st
	}
	return c.execute(ctx, v.id, latest, planDependent(facts))
}

func (c *Controller) execute(ctx context.Context, id objectID, latest *metav1.PartialObjectMetadata, p plan) error {
	switch p.kind {
	case actRemoveRefs:
		c.log.Info("removing references to gone owners", "object", id.String(), "owners", p.removeRefs)
		return c.removeOwnerRefs(ctx, id, p.removeRefs)
	case actDelete:
		if len(p.unblock) > 0 {
			if err := c.patchMeta(ctx, id, func(m *metav1.PartialObjectMetadata) (map[string]any, bool) {
				return map[string]any{"ownerReferences": unblockRefs(m.OwnerReferences, p.unblock)}, true
			}); err != nil {
				return fmt.Errorf("unblock owner references of %s: %w", id, err)
			}
		}
		c.log.Info("deleting dependent: no owner left that keeps it", "object", id.String(), "propagationPolicy", p.policy)
		return c.deleteObject(ctx, id, latest, p.policy)
	}
	return nil
}

// processDeletingDependents finishes a foreground deletion once no
// dependent blocks it, and otherwise pushes the blocking dependents along.
func (c *Controller) processDeletingDependents(ctx context.Context, v nodeView) error {
	blocking := v.blocking()
	if len(blocking) == 0 {
		c.log.Info("dependents gone, removing foregroundDeletion finalizer", "object", v.id.String())
		return c.removeFinalizer(ctx, v.id, metav1.FinalizerDeleteDependents)
	}
	for _, d := range blocking {
		if !d.deletingDependents {
			c.attemptToDelete.Add(d.id.UID)
		}
	}
	return nil
}

// processAttemptToOrphan strips the references to an owner deleted with
// the Orphan policy from all its dependents, then lets the owner go.
func (c *Controller) processAttemptToOrphan(ctx context.Context, uid types.UID) error {
	v, ok := c.graph.view(uid)
	if !ok {
		return nil
	}
	latest, err := c.getObject(ctx, v.id)
	if apierrors.IsNotFound(err) || (err == nil && latest.UID != uid) {
		return nil
	}
	if err != nil {
		return err
	}
	if latest.DeletionTimestamp == nil || !hasFinalizer(latest, metav1.FinalizerOrphanDependents) {
		return nil
	}
	for _, d := range v.dependents {
		if err := c.removeOwnerRefs(ctx, d.id, []types.UID{uid}); err != nil {
			return fmt.Errorf("orphan %s: %w", d.id, err)
		}
	}
	c.log.Info("dependents orphaned, removing orphan finalizer", "object", v.id.String(), "dependents", len(v.dependents))
	return c.removeFinalizer(ctx, v.id, metav1.FinalizerOrphanDependents)
}

// ownerState looks ref up live (the informers may lag) from dependent.
func (c *Controller) ownerState(ctx context.Context, dependent *metav1.PartialObjectMetadata, ref metav1.OwnerReference) (ownerState, error) {
	id := idFromRef(ref, dependent.Namespace)
	if c.absent.has(id) {
		return ownerDangling, nil
	}
	res, namespaced, err := c.resourceFor(id)
	if err != nil {
		return 0, err
	}
	if namespaced && dependent.Namespace == "" {
		// A cluster-scoped object cannot be owned by a namespaced one.
		c.warn(dependent, id, corev1.EventTypeWarning, "OwnerRefInvalidNamespace",
			fmt.Sprintf("ownerRef %s does not exist in namespace %q", refString(ref), dependent.Namespace))
		return ownerDangling, nil
	}
	owner, err := res.Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		c.absent.add(id)
		return ownerDangling, nil
	case err != nil:
		return 0, fmt.Errorf("get owner %s: %w", id, err)
	case owner.UID != ref.UID:
		c.absent.add(id)
		return ownerDangling, nil
	case owner.DeletionTimestamp != nil && hasFinalizer(owner, metav1.FinalizerDeleteDependents):
		return ownerWaiting, nil
	}
	return ownerSolid, nil
}

func refString(ref metav1.OwnerReference) string {
	b, _ := json.Marshal(map[string]any{"apiVersion": ref.APIVersion, "kind": ref.Kind, "name": ref.Name, "uid": ref.UID})
	return string(b)
}

// warn records an event on the object obj (nil Recorder: none).
func (c *Controller) warn(obj *metav1.PartialObjectMetadata, id objectID, eventType, reason, msg string) {
	if c.cfg.Recorder == nil {
		return
	}
	ref := obj.DeepCopy()
	ref.APIVersion, ref.Kind = id.APIVersion, id.Kind
	c.cfg.Recorder.Event(ref, eventType, reason, msg)
}

func (c *Controller) getObject(ctx context.Context, id objectID) (*metav1.PartialObjectMetadata, error) {
	res, _, err := c.resourceFor(id)
	if err != nil {
		return nil, err
	}
	return res.Get(ctx, id.Name, metav1.GetOptions{})
}

// deleteObject deletes the object latest describes, on condition that it
// is still that object at that resourceVersion. If only the version moved
// on (a status write, say) and the owners are unchanged, it deletes on
// the UID alone; if the owners changed, the decision is retaken.
func (c *Controller) deleteObject(ctx context.Context, id objectID, latest *metav1.PartialObjectMetadata, policy metav1.DeletionPropagation) error {
	res, _, err := c.resourceFor(id)
	if err != nil {
		return err
	}
	uid, rv := latest.UID, latest.ResourceVersion
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}, PropagationPolicy: &policy}
	err = res.Delete(ctx, id.Name, opts)
	if apierrors.IsConflict(err) {
		cur, gerr := res.Get(ctx, id.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(gerr):
			return nil
		case gerr != nil:
			return fmt.Errorf("get %s: %w", id, gerr)
		case cur.UID != uid:
			return nil
		case !equality.Semantic.DeepEqual(cur.OwnerReferences, latest.OwnerReferences):
			return errRefsChanged
		}
		opts.Preconditions.ResourceVersion = nil
		err = res.Delete(ctx, id.Name, opts)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s: %w", id, err)
	}
	return nil
}

func (c *Controller) removeOwnerRefs(ctx context.Context, id objectID, owners []types.UID) error {
	return c.patchMeta(ctx, id, func(m *metav1.PartialObjectMetadata) (map[string]any, bool) {
		refs := withoutRefs(m.OwnerReferences, owners)
		if len(refs) == len(m.OwnerReferences) {
			return nil, false
		}
		return map[string]any{"ownerReferences": refs}, true
	})
}

func (c *Controller) removeFinalizer(ctx context.Context, id objectID, finalizer string) error {
	return c.patchMeta(ctx, id, func(m *metav1.PartialObjectMetadata) (map[string]any, bool) {
		if !hasFinalizer(m, finalizer) {
			return nil, false
		}
		return map[string]any{"finalizers": withoutFinalizer(m.Finalizers, finalizer)}, true
	})
}

// patchMeta reads the object, lets change compute new metadata fields and
// writes them with a JSON merge patch pinned to the resourceVersion read,
// retrying on conflict. A gone object (or a namesake) is left alone.
func (c *Controller) patchMeta(ctx context.Context, id objectID, change func(*metav1.PartialObjectMetadata) (map[string]any, bool)) error {
	res, _, err := c.resourceFor(id)
	if err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := res.Get(ctx, id.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("get %s: %w", id, err)
		}
		if cur.UID != id.UID {
			return nil
		}
		fields, ok := change(cur)
		if !ok {
			return nil
		}
		fields["resourceVersion"] = cur.ResourceVersion
		body, err := json.Marshal(map[string]any{"metadata": fields})
		if err != nil {
			return err
		}
		_, err = res.Patch(ctx, id.Name, types.MergePatchType, body, metav1.PatchOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}
