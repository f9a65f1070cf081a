// Package controllerref adopts and releases the dependents of a
// controller (a Deployment's ReplicaSets, a ReplicaSet's pods) through
// their controller ownerReference, as upstream's ControllerRefManager does.
package controllerref

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Claimer claims dependents for one controller.
type Claimer[T metav1.Object] struct {
	Owner    metav1.Object
	OwnerGVK schema.GroupVersionKind
	Selector labels.Selector
	// Fresh reads the owner from the API server, not the cache: adoption
	// is refused if the owner is gone, replaced or being deleted.
	Fresh func(ctx context.Context) (metav1.Object, error)
	// Patch applies a strategic merge patch to a dependent.
	Patch func(ctx context.Context, dep T, patch []byte) error
}

// Claim returns the dependents the owner controls after adopting matching
// orphans and releasing owned ones that no longer match. Dependents of
// other controllers are left alone. Errors are joined; what could be
// claimed is returned regardless.
func (c *Claimer[T]) Claim(ctx context.Context, deps []T) ([]T, error) {
	var claimed []T
	var errs []error
	var canAdopt *error
	deleting := c.Owner.GetDeletionTimestamp() != nil
	for _, dep := range deps {
		match := c.Selector.Matches(labels.Set(dep.GetLabels()))
		ref := metav1.GetControllerOfNoCopy(dep)
		switch {
		case ref != nil && ref.UID != c.Owner.GetUID():
			// Someone else's.
		case ref != nil && match:
			claimed = append(claimed, dep)
		case ref != nil:
			if !deleting {
				if err := c.release(ctx, dep); err != nil {
					errs = append(errs, err)
				}
			}
		case !match || deleting || dep.GetDeletionTimestamp() != nil:
			// An orphan we must not take.
		default:
			if canAdopt == nil {
				err := c.checkOwner(ctx)
				canAdopt = &err
			}
			if *canAdopt != nil {
				errs = append(errs, *canAdopt)
				continue
			}
			adopted, err := c.adopt(ctx, dep)
			if err != nil {
				errs = append(errs, err)
			} else if adopted {
				claimed = append(claimed, dep)
			}
		}
	}
	return claimed, errors.Join(errs...)
}

// checkOwner fails if the owner is gone, replaced or being deleted.
func (c *Claimer[T]) checkOwner(ctx context.Context) error {
	kind, ns, name := c.OwnerGVK.Kind, c.Owner.GetNamespace(), c.Owner.GetName()
	fresh, err := c.Fresh(ctx)
	if err != nil {
		return fmt.Errorf("recheck %s %s/%s before adoption: %w", kind, ns, name, err)
	}
	if fresh.GetUID() != c.Owner.GetUID() {
		return fmt.Errorf("%s %s/%s is gone: got uid %s, wanted %s", kind, ns, name, fresh.GetUID(), c.Owner.GetUID())
	}
	if fresh.GetDeletionTimestamp() != nil {
		return fmt.Errorf("%s %s/%s is being deleted: will not adopt", kind, ns, name)
	}
	return nil
}

// adopt reports false without error when the dependent is already gone.
func (c *Claimer[T]) adopt(ctx context.Context, dep T) (bool, error) {
	patch := ownerPatch(dep.GetUID(), map[string]any{
		"apiVersion": c.OwnerGVK.GroupVersion().String(), "kind": c.OwnerGVK.Kind,
		"name": c.Owner.GetName(), "uid": c.Owner.GetUID(), "controller": true, "blockOwnerDeletion": true,
	})
	err := c.Patch(ctx, dep, patch)
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return false, fmt.Errorf("adopt %s/%s into %s: %w", dep.GetNamespace(), dep.GetName(), c.Owner.GetName(), err)
}

// release removes the owner's reference. A dependent that is gone, or was
// replaced by another of the same name (the uid precondition fails as
// Invalid), has nothing to release.
func (c *Claimer[T]) release(ctx context.Context, dep T) error {
	err := c.Patch(ctx, dep, ownerPatch(dep.GetUID(), map[string]any{"$patch": "delete", "uid": c.Owner.GetUID()}))
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
		return nil
	}
	return fmt.Errorf("release %s/%s from %s: %w", dep.GetNamespace(), dep.GetName(), c.Owner.GetName(), err)
}

// ownerPatch is a strategic merge patch of one ownerReferences entry; the
// uid makes it fail on a recreated dependent of the same name.
func ownerPatch(depUID types.UID, ref map[string]any) []byte {
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": []any{ref}, "uid": depUID}})
	return body
}
