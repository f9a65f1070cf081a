package registry

import (
	"fmt"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The rbac.authorization.k8s.io/v1 kinds, in upstream's discovery order.
// Escalation prevention (a user may only grant what they hold, unless
// allowed to escalate or bind) needs the authorizer and the caller, so it
// is the API server's step (apiserver/rbac.go), not a hook here.
func rbacResources() []*Resource {
	return []*Resource{
		rbacResource("clusterrolebindings", "ClusterRoleBinding", false,
			func() runtime.Object { return &rbacv1.ClusterRoleBinding{} },
			func() runtime.Object { return &rbacv1.ClusterRoleBindingList{} },
			bindingColumns(), row(func(b *rbacv1.ClusterRoleBinding, now time.Time) []interface{} {
				return bindingRow(b.Name, b.CreationTimestamp, b.RoleRef, b.Subjects, now)
			})),
		rbacResource("clusterroles", "ClusterRole", false,
			func() runtime.Object { return &rbacv1.ClusterRole{} },
			func() runtime.Object { return &rbacv1.ClusterRoleList{} },
			roleColumns(), row(func(r *rbacv1.ClusterRole, _ time.Time) []interface{} { return roleRow(r.ObjectMeta) })),
		rbacResource("rolebindings", "RoleBinding", true,
			func() runtime.Object { return &rbacv1.RoleBinding{} },
			func() runtime.Object { return &rbacv1.RoleBindingList{} },
			bindingColumns(), row(func(b *rbacv1.RoleBinding, now time.Time) []interface{} {
				return bindingRow(b.Name, b.CreationTimestamp, b.RoleRef, b.Subjects, now)
			})),
		rbacResource("roles", "Role", true,
			func() runtime.Object { return &rbacv1.Role{} },
			func() runtime.Object { return &rbacv1.RoleList{} },
			roleColumns(), row(func(r *rbacv1.Role, _ time.Time) []interface{} { return roleRow(r.ObjectMeta) })),
	}
}

func rbacResource(name, kind string, namespaced bool, newObj, newList func() runtime.Object,
	columns []metav1.TableColumnDefinition, rowFn func(runtime.Object, time.Time) []interface{}) *Resource {
	return &Resource{
		GroupVersion: rbacv1.SchemeGroupVersion,
		Name:         name,
		Kind:         kind,
		ListKind:     kind + "List",
		Namespaced:   namespaced,
		Verbs:        allVerbs(),
		New:          newObj,
		NewList:      newList,
		Columns:      columns,
		Row:          rowFn,
	}
}

// roleColumns and bindingColumns are upstream's printers' for the four
// kinds (roles: name and creation time; bindings: the role, age, and in
// -o wide the subjects by kind).
func roleColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Created At", Type: "date", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
	}
}

func roleRow(m metav1.ObjectMeta) []interface{} {
	return []interface{}{m.Name, m.CreationTimestamp.UTC().Format(time.RFC3339)}
}

func bindingColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Role", Type: "string", Description: rbacv1.RoleBinding{}.SwaggerDoc()["roleRef"]},
		ageColumn(),
		{Name: "Users", Type: "string", Priority: 1, Description: "Users in the roleBinding"},
		{Name: "Groups", Type: "string", Priority: 1, Description: "Groups in the roleBinding"},
		{Name: "ServiceAccounts", Type: "string", Priority: 1, Description: "ServiceAccounts in the roleBinding"},
	}
}

func bindingRow(name string, created metav1.Time, ref rbacv1.RoleRef, subjects []rbacv1.Subject, now time.Time) []interface{} {
	var users, groups, accounts []string
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.UserKind:
			users = append(users, s.Name)
		case rbacv1.GroupKind:
			groups = append(groups, s.Name)
		case rbacv1.ServiceAccountKind:
			accounts = append(accounts, fmt.Sprintf("%s/%s", s.Namespace, s.Name))
		}
	}
	return []interface{}{name, ref.Kind + "/" + ref.Name, age(created, now),
		strings.Join(users, ", "), strings.Join(groups, ", "), strings.Join(accounts, ", ")}
}
