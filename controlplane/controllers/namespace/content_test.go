package namespace

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestDeletableResources(t *testing.T) {
	lists := []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "pods", Namespaced: true, Verbs: []string{"delete", "deletecollection", "list"}},
			{Name: "pods/status", Namespaced: true, Verbs: []string{"get", "update"}},
			{Name: "services", Namespaced: true, Verbs: []string{"delete", "list"}},
			{Name: "nodes", Namespaced: false, Verbs: []string{"delete", "list"}},
			{Name: "bindings", Namespaced: true, Verbs: []string{"create"}},
			{Name: "blind", Namespaced: true, Verbs: []string{"delete"}},
		}},
		{GroupVersion: "a/b/c", APIResources: []metav1.APIResource{{Name: "x", Namespaced: true, Verbs: []string{"delete", "list"}}}},
	}
	got, gvErrs := deletableResources(lists)
	var names []string
	for _, d := range got {
		names = append(names, d.gvr.Resource)
	}
	if len(names) != 2 || names[0] != "pods" || names[1] != "services" {
		t.Errorf("resources = %v, want [pods services]", names)
	}
	if len(gvErrs) != 1 {
		t.Errorf("group version errors = %v, want one", gvErrs)
	}
}

func TestContentResultErr(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	tests := []struct {
		name          string
		r             contentResult
		wantRemaining bool
		wantEstimate  time.Duration
		wantNil       bool
	}{
		{name: "empty", r: contentResult{}, wantNil: true},
		{name: "remaining with deadline", r: contentResult{remaining: map[schema.GroupResource]int{pods: 2}, estimate: 3 * time.Second},
			wantRemaining: true, wantEstimate: 3 * time.Second},
		{name: "delete error wins", r: contentResult{remaining: map[schema.GroupResource]int{pods: 1}, deleteErrs: []error{errors.New("boom")}}},
		{name: "discovery error blocks finalizing", r: contentResult{discoveryErr: errors.New("down")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.r.err()
			if tt.wantNil != (err == nil) {
				t.Fatalf("err = %v", err)
			}
			var rem *contentRemainingError
			if errors.As(err, &rem) != tt.wantRemaining {
				t.Fatalf("err = %v, remaining = %v", err, tt.wantRemaining)
			}
			if rem != nil && rem.estimate != tt.wantEstimate {
				t.Errorf("estimate = %v, want %v", rem.estimate, tt.wantEstimate)
			}
		})
	}
}

func TestConditions(t *testing.T) {
	r := contentResult{
		deleteErrs: []error{errors.New("delete collection pods: boom")},
		remaining:  map[schema.GroupResource]int{{Group: "apps", Resource: "deployments"}: 1, {Resource: "pods"}: 2},
		finalizers: map[string]int{"example.com/x": 1},
	}
	var st corev1.NamespaceStatus
	t0 := metav1.NewTime(time.Unix(100, 0))
	if !mergeConditions(&st, r.conditions(), t0) {
		t.Fatal("first merge reported no change")
	}
	if len(st.Conditions) != 5 {
		t.Fatalf("conditions = %+v, want all five types", st.Conditions)
	}
	want := map[corev1.NamespaceConditionType]struct {
		status corev1.ConditionStatus
		reason string
		msg    string
	}{
		corev1.NamespaceDeletionDiscoveryFailure: {corev1.ConditionFalse, "ResourcesDiscovered", "All resources successfully discovered"},
		corev1.NamespaceDeletionContentFailure: {corev1.ConditionTrue, "ContentDeletionFailed",
			"Failed to delete all resource types, 1 remaining: delete collection pods: boom"},
		corev1.NamespaceContentRemaining: {corev1.ConditionTrue, "SomeResourcesRemain",
			"Some resources are remaining: deployments.apps has 1 resource instances, pods. has 2 resource instances"},
		corev1.NamespaceFinalizersRemaining: {corev1.ConditionTrue, "SomeFinalizerRemain", "Some finalizers are remaining: example.com/x in 1 resource instances"},
	}
	for _, c := range st.Conditions {
		w, ok := want[c.Type]
		if ok && (c.Status != w.status || c.Reason != w.reason || c.Message != w.msg) {
			t.Errorf("%s = %s/%s/%q, want %s/%s/%q", c.Type, c.Status, c.Reason, c.Message, w.status, w.reason, w.msg)
		}
	}
	if mergeConditions(&st, r.conditions(), metav1.NewTime(time.Unix(200, 0))) {
		t.Error("same conditions reported a change")
	}
	// Recovery flips the failures to their ok form with a new transition time.
	if !mergeConditions(&st, contentResult{}.conditions(), metav1.NewTime(time.Unix(300, 0))) {
		t.Fatal("recovery reported no change")
	}
	for _, c := range st.Conditions {
		if c.Status != corev1.ConditionFalse {
			t.Errorf("%s still %s", c.Type, c.Status)
		}
		if c.Type == corev1.NamespaceDeletionDiscoveryFailure && !c.LastTransitionTime.Equal(&t0) {
			t.Errorf("unchanged condition moved its transition time to %v", c.LastTransitionTime)
		}
		if c.Type == corev1.NamespaceContentRemaining && c.LastTransitionTime.Unix() != 300 {
			t.Errorf("flipped condition transition time = %v", c.LastTransitionTime)
		}
	}
}
