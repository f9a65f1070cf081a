package authorization

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

// TestDefaultPolicyRefersToItsOwnRoles: every binding of the policy names
// a role the policy itself reconciles, so no grant dangles on a fresh
// cluster, and the components' identities are bound.
func TestDefaultPolicyRefersToItsOwnRoles(t *testing.T) {
	p := DefaultPolicy()
	clusterRoles := map[string]bool{}
	for _, r := range p.ClusterRoles {
		clusterRoles[r.Name] = true
	}
	roles := map[string]bool{}
	for _, r := range p.Roles {
		roles[r.Namespace+"/"+r.Name] = true
	}
	subjects := map[string]bool{}
	for _, b := range p.ClusterRoleBindings {
		if !clusterRoles[b.RoleRef.Name] {
			t.Errorf("clusterrolebinding %s names the missing cluster role %s", b.Name, b.RoleRef.Name)
		}
		for _, s := range b.Subjects {
			subjects[s.Kind+":"+s.Namespace+":"+s.Name] = true
		}
	}
	for _, b := range p.RoleBindings {
		if b.RoleRef.Kind == "Role" && !roles[b.Namespace+"/"+b.RoleRef.Name] {
			t.Errorf("rolebinding %s/%s names the missing role %s", b.Namespace, b.Name, b.RoleRef.Name)
		}
		for _, s := range b.Subjects {
			subjects[s.Kind+":"+s.Namespace+":"+s.Name] = true
		}
	}
	for _, want := range []string{
		rbacv1.UserKind + "::" + ControllerManagerUser,
		rbacv1.UserKind + "::" + SchedulerUser,
		rbacv1.GroupKind + "::system:nodes",
		rbacv1.ServiceAccountKind + ":kube-system:deployment-controller",
		rbacv1.ServiceAccountKind + ":kube-system:endpoint-controller",
		rbacv1.ServiceAccountKind + ":kube-system:generic-garbage-collector",
		rbacv1.ServiceAccountKind + ":kube-system:clusterrole-aggregation-controller",
		rbacv1.GroupKind + "::system:authenticated",
	} {
		if !subjects[want] {
			t.Errorf("no binding for %s", want)
		}
	}
}
