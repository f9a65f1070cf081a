package registry

import (
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestRBACKinds(t *testing.T) {
	none := func(runtime.Object) string { return "" } // rbac/v1 defaults only roleRef.apiGroup of subjects
	runWorkloadCases(t, []workloadCase{
		{
			resource: "roles",
			valid: func() runtime.Object {
				return &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader", Namespace: "default"},
					Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}}}
			},
			breakIt:   func(o runtime.Object) { o.(*rbacv1.Role).Rules[0].Verbs = nil },
			want:      []string{"FieldValueRequired rules[0].verbs"},
			defaulted: none,
		},
		{
			resource: "clusterroles",
			valid: func() runtime.Object {
				return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "metrics"},
					Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
			},
			// A namespaced Role may not name non-resource URLs; a
			// ClusterRole may, but not together with resources.
			breakIt:   func(o runtime.Object) { o.(*rbacv1.ClusterRole).Rules[0].Resources = []string{"pods"} },
			want:      []string{"FieldValueInvalid rules[0].nonResourceURLs"},
			defaulted: none,
		},
		{
			resource: "rolebindings",
			valid: func() runtime.Object {
				return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "read-pods", Namespace: "default"},
					Subjects: []rbacv1.Subject{{Kind: "User", Name: "jane", APIGroup: rbacv1.GroupName}},
					RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"}}
			},
			breakIt:   func(o runtime.Object) { o.(*rbacv1.RoleBinding).RoleRef.Kind = "Deployment" },
			want:      []string{"FieldValueNotSupported roleRef.kind"},
			defaulted: none,
		},
		{
			resource: "clusterrolebindings",
			valid: func() runtime.Object {
				return &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "read-secrets-global"},
					Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "manager", Namespace: "dev"}},
					RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "secret-reader"}}
			},
			breakIt:   func(o runtime.Object) { o.(*rbacv1.ClusterRoleBinding).Subjects[0].Namespace = "" },
			want:      []string{"FieldValueRequired subjects[0].namespace"},
			defaulted: none,
		},
	})
}

func TestRBACTables(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	created := metav1.NewTime(now.Add(-90 * time.Second))
	b := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "rb", CreationTimestamp: created},
		RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: "jane"}, {Kind: "User", Name: "joe"}, {Kind: "Group", Name: "devs"},
			{Kind: "ServiceAccount", Namespace: "ci", Name: "runner"}}}
	r := resourceByName(t, "rolebindings")
	got := r.Row(b, now)
	want := []interface{}{"rb", "ClusterRole/view", "90s", "jane, joe", "devs", "ci/runner"}
	if len(got) != len(want) || len(r.Columns) != len(want) {
		t.Fatalf("row %v, %d columns", got, len(r.Columns))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("cell %s: %v, want %v", r.Columns[i].Name, got[i], want[i])
		}
	}
	role := resourceByName(t, "clusterroles").Row(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "view", CreationTimestamp: created}}, now)
	if role[1] != "2026-11-27T11:58:30Z" {
		t.Errorf("Created At %v", role[1])
	}
}
