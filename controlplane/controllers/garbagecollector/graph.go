package garbagecollector

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// objectID names one object the way an ownerReference does, plus the
// namespace: for an owner known only from a reference, the namespace is
// the dependent's (the API lookup drops it when the owner's kind turns out
// to be cluster-scoped).
type objectID struct {
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
	UID        types.UID
}

func (id objectID) groupKind() schema.GroupKind {
	gv, _ := schema.ParseGroupVersion(id.APIVersion)
	return schema.GroupKind{Group: gv.Group, Kind: id.Kind}
}

func (id objectID) String() string {
	ns := id.Namespace
	if ns != "" {
		ns += "/"
	}
	return id.APIVersion + "/" + id.Kind + " " + ns + id.Name + " (" + string(id.UID) + ")"
}

// idFromRef is the identity of the owner ref points to, seen from a
// dependent in namespace ns.
func idFromRef(ref metav1.OwnerReference, ns string) objectID {
	return objectID{APIVersion: ref.APIVersion, Kind: ref.Kind, Namespace: ns, Name: ref.Name, UID: ref.UID}
}

// refMatches reports whether ref names the observed object id by group,
// kind and name. The version may differ: a reference stays valid across
// API versions of the same group.
func refMatches(ref metav1.OwnerReference, id objectID) bool {
	return ref.Name == id.Name && idFromRef(ref, "").groupKind() == id.groupKind()
}

// node is one object in the dependency graph. A node is "virtual" (not
// observed) when only ownerReferences name it: it may not exist at all.
type node struct {
	id         objectID
	observed   bool
	owners     []metav1.OwnerReference
	dependents map[types.UID]*node
	// beingDeleted: the object has a deletionTimestamp.
	beingDeleted bool
	// deletingDependents: beingDeleted with the foregroundDeletion
	// finalizer; the object waits for its blocking dependents.
	deletingDependents bool
}

// refTo returns the reference from n to the owner with uid, if any.
func (n *node) refTo(uid types.UID) (metav1.OwnerReference, bool) {
	for _, r := range n.owners {
		if r.UID == uid {
			return r, true
		}
	}
	return metav1.OwnerReference{}, false
}

// nodeView is a copy of what a worker needs from a node, taken under the
// graph lock so that workers never read nodes the event handlers change.
type nodeView struct {
	id                 objectID
	observed           bool
	deletingDependents bool
	// dependents with the reference each holds to this node.
	dependents []dependentView
}

type dependentView struct {
	id                 objectID
	ref                metav1.OwnerReference
	deletingDependents bool
}

// blocking lists the dependents whose reference to the node has
// blockOwnerDeletion=true: a foreground deletion waits for them.
func (v nodeView) blocking() []dependentView {
	var out []dependentView
	for _, d := range v.dependents {
		if d.ref.BlockOwnerDeletion != nil && *d.ref.BlockOwnerDeletion {
			out = append(out, d)
		}
	}
	return out
}

// effects are the work items a graph change asks for: UIDs to put on the
// attemptToDelete and attemptToOrphan queues.
type effects struct {
	attemptToDelete []types.UID
	attemptToOrphan []types.UID
}

func (e *effects) delete(uid types.UID) { e.attemptToDelete = append(e.attemptToDelete, uid) }

// graph is the owner→dependents graph keyed by UID. Informer handlers
// change it; workers read copies of nodes from it. All methods lock.
type graph struct {
	mu    sync.Mutex
	nodes map[types.UID]*node
}

func newGraph() *graph { return &graph{nodes: map[types.UID]*node{}} }

// view copies the node with uid; ok is false if the graph does not hold it.
func (g *graph) view(uid types.UID) (nodeView, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n, ok := g.nodes[uid]
	if !ok {
		return nodeView{}, false
	}
	v := nodeView{id: n.id, observed: n.observed, deletingDependents: n.deletingDependents}
	for _, d := range n.dependents {
		ref, _ := d.refTo(uid)
		v.dependents = append(v.dependents, dependentView{id: d.id, ref: ref, deletingDependents: d.deletingDependents})
	}
	return v, true
}

// len reports the number of nodes (for tests and logs).
func (g *graph) len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.nodes)
}

// observe records an added or updated object seen by an informer. id
// carries the object's apiVersion and kind as served.
func (g *graph) observe(id objectID, m metav1.Object) effects {
	g.mu.Lock()
	defer g.mu.Unlock()
	var eff effects
	n, found := g.nodes[id.UID]
	if !found {
		n = &node{dependents: map[types.UID]*node{}}
		g.nodes[id.UID] = n
	}
	wasVirtual := !n.observed
	wasDeletingDependents := n.deletingDependents
	oldOwners := n.owners
	n.id, n.observed, n.owners = id, true, m.GetOwnerReferences()
	n.beingDeleted = m.GetDeletionTimestamp() != nil
	n.deletingDependents = n.beingDeleted && hasFinalizer(m, metav1.FinalizerDeleteDependents)

	added, removed, unblocked := diffOwners(oldOwners, n.owners)
	for _, ref := range added {
		g.linkOwner(n, ref, &eff)
	}
	for _, ref := range removed {
		g.unlinkOwner(n, ref.UID, &eff)
	}
	for _, ref := range unblocked {
		if o, ok := g.nodes[ref.UID]; ok && o.deletingDependents {
			eff.delete(o.id.UID)
		}
	}
	if wasVirtual {
		// Dependents that named this object by another group, kind or
		// name point at nothing: let the workers check them.
		for _, d := range n.dependents {
			if ref, ok := d.refTo(n.id.UID); ok && !refMatches(ref, n.id) {
				eff.delete(d.id.UID)
			}
		}
	}
	if n.deletingDependents && !wasDeletingDependents {
		eff.delete(n.id.UID)
		for _, d := range n.dependents {
			eff.delete(d.id.UID)
		}
	}
	if n.beingDeleted && hasFinalizer(m, metav1.FinalizerOrphanDependents) {
		eff.attemptToOrphan = append(eff.attemptToOrphan, n.id.UID)
	}
	return eff
}

// linkOwner adds n as a dependent of the owner ref names, creating a
// virtual owner node (and asking for it to be verified) when the graph
// has not seen the owner.
func (g *graph) linkOwner(n *node, ref metav1.OwnerReference, eff *effects) {
	o, ok := g.nodes[ref.UID]
	if !ok {
		o = &node{id: idFromRef(ref, n.id.Namespace), dependents: map[types.UID]*node{}}
		g.nodes[ref.UID] = o
		eff.delete(ref.UID)
	}
	o.dependents[n.id.UID] = n
	switch {
	case o.deletingDependents:
		eff.delete(n.id.UID) // joins a foreground deletion in progress
	case o.observed && !refMatches(ref, o.id):
		eff.delete(n.id.UID) // the reference names another object
	}
}

// unlinkOwner removes n from the dependents of the owner with uid.
func (g *graph) unlinkOwner(n *node, uid types.UID, eff *effects) {
	o, ok := g.nodes[uid]
	if !ok {
		return
	}
	delete(o.dependents, n.id.UID)
	if o.deletingDependents {
		eff.delete(uid) // may have lost its last blocking dependent
	}
	if !o.observed && len(o.dependents) == 0 {
		delete(g.nodes, uid)
	}
}

// forget removes the object with uid: an informer saw it deleted, or a
// worker found it gone. Its dependents are queued to be collected.
func (g *graph) forget(uid types.UID) effects {
	g.mu.Lock()
	defer g.mu.Unlock()
	var eff effects
	n, ok := g.nodes[uid]
	if !ok {
		return eff
	}
	delete(g.nodes, uid)
	for _, ref := range n.owners {
		g.unlinkOwner(n, ref.UID, &eff)
	}
	for _, d := range n.dependents {
		eff.delete(d.id.UID)
	}
	return eff
}

// diffOwners compares two ownerReference lists by UID: references only in
// next, references only in prev, and references that stopped blocking
// their owner's deletion.
func diffOwners(prev, next []metav1.OwnerReference) (added, removed, unblocked []metav1.OwnerReference) {
	old := make(map[types.UID]metav1.OwnerReference, len(prev))
	for _, r := range prev {
		old[r.UID] = r
	}
	for _, r := range next {
		o, ok := old[r.UID]
		if !ok {
			added = append(added, r)
			continue
		}
		delete(old, r.UID)
		if isBlocking(o) && !isBlocking(r) {
			unblocked = append(unblocked, r)
		}
	}
	for _, r := range prev {
		if _, ok := old[r.UID]; ok {
			removed = append(removed, r)
		}
	}
	return added, removed, unblocked
}

func isBlocking(r metav1.OwnerReference) bool {
	return r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion
}

func hasFinalizer(m metav1.Object, f string) bool {
	for _, x := range m.GetFinalizers() {
		if x == f {
			return true
		}
	}
	return false
}
