package garbagecollector

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ownerState is what a live lookup found for one ownerReference.
type ownerState int

const (
	// ownerSolid: the owner exists under that UID and is not waiting for
	// its dependents.
	ownerSolid ownerState = iota
	// ownerDangling: no object of that name, or one with another UID.
	ownerDangling
	// ownerWaiting: the owner is being deleted in the foreground and
	// waits for its dependents to go.
	ownerWaiting
)

type actionKind int

const (
	actNone actionKind = iota
	// actRemoveRefs: the dependent keeps a live owner; drop the
	// references to the gone and the foreground-deleting owners.
	actRemoveRefs
	// actDelete: no live owner is left; delete the dependent.
	actDelete
)

// plan is what attemptToDelete does with one dependent.
type plan struct {
	kind actionKind
	// removeRefs: owner UIDs whose references go (actRemoveRefs).
	removeRefs []types.UID
	// unblock: before deleting, set blockOwnerDeletion=false on the
	// references to foreground-deleting owners, so that a dependency
	// cycle of foreground deletions cannot wait on itself forever.
	unblock []types.UID
	policy  metav1.DeletionPropagation
}

// dependentFacts is what planDependent decides from.
type dependentFacts struct {
	refs   []metav1.OwnerReference
	states map[types.UID]ownerState
	// finalizers of the dependent: an orphan or foreground finalizer
	// already recorded on it decides how it is deleted.
	finalizers []string
	// hasDependents: the graph knows dependents of this object.
	hasDependents bool
	// dependentDeletingDependents: one of those is itself being deleted in
	// the foreground (a possible cycle).
	dependentDeletingDependents bool
}

// planDependent decides, as upstream's garbage collector does, what to do
// with an object whose owners were looked up:
//   - some owner is solid: keep the object, drop references to dangling
//     and waiting owners (none: nothing to do);
//   - some owner waits for its dependents and the object has dependents of
//     its own: delete it in the foreground, so the waiting owner also
//     waits for the grandchildren;
//   - otherwise: delete it, honouring an orphan or foreground finalizer
//     already on it, else in the background.
func planDependent(f dependentFacts) plan {
	var solid, dangling, waiting []types.UID
	for _, r := range f.refs {
		switch f.states[r.UID] {
		case ownerSolid:
			solid = append(solid, r.UID)
		case ownerDangling:
			dangling = append(dangling, r.UID)
		case ownerWaiting:
			waiting = append(waiting, r.UID)
		}
	}
	switch {
	case len(f.refs) == 0:
		return plan{kind: actNone}
	case len(solid) > 0:
		if len(dangling)+len(waiting) == 0 {
			return plan{kind: actNone}
		}
		return plan{kind: actRemoveRefs, removeRefs: append(dangling, waiting...)}
	case len(waiting) > 0 && f.hasDependents:
		p := plan{kind: actDelete, policy: metav1.DeletePropagationForeground}
		if f.dependentDeletingDependents {
			for _, r := range f.refs {
				if f.states[r.UID] == ownerWaiting && isBlocking(r) {
					p.unblock = append(p.unblock, r.UID)
				}
			}
		}
		return p
	}
	policy := metav1.DeletePropagationBackground
	for _, fin := range f.finalizers {
		switch fin {
		case metav1.FinalizerOrphanDependents:
			return plan{kind: actDelete, policy: metav1.DeletePropagationOrphan}
		case metav1.FinalizerDeleteDependents:
			policy = metav1.DeletePropagationForeground
		}
	}
	return plan{kind: actDelete, policy: policy}
}

// withoutRefs returns refs minus those to the owners in uids.
func withoutRefs(refs []metav1.OwnerReference, uids []types.UID) []metav1.OwnerReference {
	drop := make(map[types.UID]bool, len(uids))
	for _, u := range uids {
		drop[u] = true
	}
	var out []metav1.OwnerReference
	for _, r := range refs {
		if !drop[r.UID] {
			out = append(out, r)
		}
	}
	return out
}

// unblockRefs returns a copy of refs with blockOwnerDeletion=false on the
// references to the owners in uids.
func unblockRefs(refs []metav1.OwnerReference, uids []types.UID) []metav1.OwnerReference {
	set := make(map[types.UID]bool, len(uids))
	for _, u := range uids {
		set[u] = true
	}
	out := make([]metav1.OwnerReference, len(refs))
	for i, r := range refs {
		out[i] = *r.DeepCopy()
		if set[r.UID] {
			f := false
			out[i].BlockOwnerDeletion = &f
		}
	}
	return out
}

// withoutFinalizer returns fins minus f.
func withoutFinalizer(fins []string, f string) []string {
	var out []string
	for _, x := range fins {
		if x != f {
			out = append(out, x)
		}
	}
	return out
}
