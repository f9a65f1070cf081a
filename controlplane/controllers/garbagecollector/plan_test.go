package garbagecollector

import (
	"reflect"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

func ref(uid string, block bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "o-" + uid, UID: types.UID(uid), BlockOwnerDeletion: &block}
}

func TestPlanDependent(t *testing.T) {
	a, b := ref("a", true), ref("b", false)
	st := func(sa, sb ownerState) map[types.UID]ownerState { return map[types.UID]ownerState{"a": sa, "b": sb} }
	tests := []struct {
		name string
		f    dependentFacts
		want plan
	}{
		{"no owners", dependentFacts{}, plan{kind: actNone}},
		{"all solid", dependentFacts{refs: []metav1.OwnerReference{a, b}, states: st(ownerSolid, ownerSolid)}, plan{kind: actNone}},
		{"one dangling, one solid", dependentFacts{refs: []metav1.OwnerReference{a, b}, states: st(ownerDangling, ownerSolid)},
			plan{kind: actRemoveRefs, removeRefs: []types.UID{"a"}}},
		{"one waiting, one solid", dependentFacts{refs: []metav1.OwnerReference{a, b}, states: st(ownerSolid, ownerWaiting)},
			plan{kind: actRemoveRefs, removeRefs: []types.UID{"b"}}},
		{"all dangling", dependentFacts{refs: []metav1.OwnerReference{a, b}, states: st(ownerDangling, ownerDangling)},
			plan{kind: actDelete, policy: metav1.DeletePropagationBackground}},
		{"waiting, no own dependents", dependentFacts{refs: []metav1.OwnerReference{a}, states: st(ownerWaiting, 0)},
			plan{kind: actDelete, policy: metav1.DeletePropagationBackground}},
		{"waiting, own dependents", dependentFacts{refs: []metav1.OwnerReference{a}, states: st(ownerWaiting, 0), hasDependents: true},
			plan{kind: actDelete, policy: metav1.DeletePropagationForeground}},
		{"waiting, possible cycle", dependentFacts{refs: []metav1.OwnerReference{a, b}, states: st(ownerWaiting, ownerWaiting),
			hasDependents: true, dependentDeletingDependents: true},
			plan{kind: actDelete, policy: metav1.DeletePropagationForeground, unblock: []types.UID{"a"}}},
		{"orphan finalizer honoured", dependentFacts{refs: []metav1.OwnerReference{a}, states: st(ownerDangling, 0),
			finalizers: []string{metav1.FinalizerDeleteDependents, metav1.FinalizerOrphanDependents}},
			plan{kind: actDelete, policy: metav1.DeletePropagationOrphan}},
		{"foreground finalizer honoured", dependentFacts{refs: []metav1.OwnerReference{a}, states: st(ownerDangling, 0),
			finalizers: []string{metav1.FinalizerDeleteDependents}},
			plan{kind: actDelete, policy: metav1.DeletePropagationForeground}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := planDependent(tt.f); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDiffOwners(t *testing.T) {
	a, b, c := ref("a", true), ref("b", false), ref("c", false)
	aUnblocked := ref("a", false)
	added, removed, unblocked := diffOwners([]metav1.OwnerReference{a, b}, []metav1.OwnerReference{aUnblocked, c})
	uids := func(rs []metav1.OwnerReference) []types.UID {
		var out []types.UID
		for _, r := range rs {
			out = append(out, r.UID)
		}
		return out
	}
	if got := uids(added); !slices.Equal(got, []types.UID{"c"}) {
		t.Errorf("added = %v", got)
	}
	if got := uids(removed); !slices.Equal(got, []types.UID{"b"}) {
		t.Errorf("removed = %v", got)
	}
	if got := uids(unblocked); !slices.Equal(got, []types.UID{"a"}) {
		t.Errorf("unblocked = %v", got)
	}
}

func TestRefEdits(t *testing.T) {
	refs := []metav1.OwnerReference{ref("a", true), ref("b", true)}
	if got := withoutRefs(refs, []types.UID{"a"}); len(got) != 1 || got[0].UID != "b" {
		t.Errorf("withoutRefs = %+v", got)
	}
	if got := withoutRefs(refs, []types.UID{"a", "b"}); got != nil {
		t.Errorf("withoutRefs all = %+v, want nil (a null in the merge patch)", got)
	}
	got := unblockRefs(refs, []types.UID{"b"})
	if !*got[0].BlockOwnerDeletion || *got[1].BlockOwnerDeletion || !*refs[1].BlockOwnerDeletion {
		t.Errorf("unblockRefs = %+v (input changed: %v)", got, !*refs[1].BlockOwnerDeletion)
	}
	if got := withoutFinalizer([]string{"orphan", "x"}, "orphan"); !slices.Equal(got, []string{"x"}) {
		t.Errorf("withoutFinalizer = %v", got)
	}
}

func TestCollectable(t *testing.T) {
	lists := []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "pods", Kind: "Pod", Verbs: []string{"create", "delete", "list", "watch"}},
			{Name: "pods/status", Kind: "Pod", Verbs: []string{"get", "update"}},
			{Name: "events", Kind: "Event", Verbs: []string{"delete", "list", "watch"}},
			{Name: "bindings", Kind: "Binding", Verbs: []string{"create"}},
		}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
			{Name: "deployments", Kind: "Deployment", Verbs: []string{"delete", "list", "watch", "get"}},
			{Name: "noWatch", Kind: "X", Verbs: []string{"delete", "list"}},
		}},
	}
	got := collectable(lists, DefaultIgnoredResources())
	want := map[schema.GroupVersionResource]string{
		{Version: "v1", Resource: "pods"}:                       "Pod",
		{Group: "apps", Version: "v1", Resource: "deployments"}: "Deployment",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("collectable = %v, want %v", got, want)
	}
}

func objMeta(uid string, owners ...metav1.OwnerReference) *metav1.ObjectMeta {
	return &metav1.ObjectMeta{Name: "o-" + uid, Namespace: "ns", UID: types.UID(uid), OwnerReferences: owners}
}

func cmID(uid string) objectID {
	return objectID{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "o-" + uid, UID: types.UID(uid)}
}

func TestGraphVirtualOwnerAndForget(t *testing.T) {
	g := newGraph()
	eff := g.observe(cmID("d"), objMeta("d", ref("o", true)))
	if !slices.Equal(eff.attemptToDelete, []types.UID{"o"}) {
		t.Fatalf("unseen owner not queued for verification: %+v", eff)
	}
	v, ok := g.view("o")
	if !ok || v.observed || len(v.blocking()) != 1 {
		t.Fatalf("virtual owner view = %+v, %v", v, ok)
	}
	if eff := g.observe(cmID("o"), objMeta("o")); len(eff.attemptToDelete) != 0 {
		t.Errorf("observing a matching owner queued %+v", eff)
	}
	eff = g.forget("o")
	if !slices.Equal(eff.attemptToDelete, []types.UID{"d"}) {
		t.Errorf("forgetting owner queued %+v, want its dependent", eff)
	}
	// The dependent dropping its reference removes the last trace of o.
	g.observe(cmID("d"), objMeta("d"))
	if g.len() != 1 {
		t.Errorf("graph holds %d nodes, want 1", g.len())
	}
}

func TestGraphDeletionTransitions(t *testing.T) {
	g := newGraph()
	g.observe(cmID("o"), objMeta("o"))
	g.observe(cmID("d"), objMeta("d", ref("o", true)))
	now := metav1.Now()

	fg := objMeta("o")
	fg.DeletionTimestamp, fg.Finalizers = &now, []string{metav1.FinalizerDeleteDependents}
	eff := g.observe(cmID("o"), fg)
	if !slices.Equal(eff.attemptToDelete, []types.UID{"o", "d"}) {
		t.Errorf("foreground deletion queued %+v, want owner and dependent", eff)
	}
	// A dependent dropping its blocking reference wakes the owner.
	eff = g.observe(cmID("d"), objMeta("d", ref("o", false)))
	if !slices.Equal(eff.attemptToDelete, []types.UID{"o"}) {
		t.Errorf("unblocking queued %+v, want the owner", eff)
	}

	or := objMeta("o")
	or.DeletionTimestamp, or.Finalizers = &now, []string{metav1.FinalizerOrphanDependents}
	if eff := g.observe(cmID("o"), or); !slices.Equal(eff.attemptToOrphan, []types.UID{"o"}) {
		t.Errorf("orphan deletion queued %+v", eff)
	}
}

func TestGraphReferenceToWrongKind(t *testing.T) {
	g := newGraph()
	g.observe(objectID{APIVersion: "v1", Kind: "Secret", Namespace: "ns", Name: "o-o", UID: "o"}, objMeta("o"))
	eff := g.observe(cmID("d"), objMeta("d", ref("o", false))) // ref says ConfigMap
	if !slices.Equal(eff.attemptToDelete, []types.UID{"d"}) {
		t.Errorf("mismatched reference queued %+v, want the dependent", eff)
	}
}
