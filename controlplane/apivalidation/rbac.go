package apivalidation

import (
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kubernetes/pkg/apis/rbac"
	rbacvalidation "k8s.io/kubernetes/pkg/apis/rbac/validation"
)

// validateRBAC runs upstream's rbac.authorization.k8s.io strategies'
// validation (pkg/registry/rbac/*/strategy.go); old is nil on create.
func validateRBAC(obj, old runtime.Object) (field.ErrorList, bool) {
	switch o := obj.(type) {
	case *rbac.Role:
		if old == nil {
			return rbacvalidation.ValidateRole(o), true
		}
		return rbacvalidation.ValidateRoleUpdate(o, old.(*rbac.Role)), true
	case *rbac.ClusterRole:
		if old == nil {
			return rbacvalidation.ValidateClusterRole(o, rbacvalidation.ClusterRoleValidationOptions{}), true
		}
		oldRole := old.(*rbac.ClusterRole)
		opts := rbacvalidation.ClusterRoleValidationOptions{AllowInvalidLabelValueInSelector: invalidAggregationSelector(oldRole)}
		return rbacvalidation.ValidateClusterRoleUpdate(o, oldRole, opts), true
	case *rbac.RoleBinding:
		if old == nil {
			return rbacvalidation.ValidateRoleBinding(o), true
		}
		return rbacvalidation.ValidateRoleBindingUpdate(o, old.(*rbac.RoleBinding)), true
	case *rbac.ClusterRoleBinding:
		if old == nil {
			return rbacvalidation.ValidateClusterRoleBinding(o), true
		}
		return rbacvalidation.ValidateClusterRoleBindingUpdate(o, old.(*rbac.ClusterRoleBinding)), true
	}
	return nil, false
}

// invalidAggregationSelector: an update keeps tolerating selectors the
// stored role already had, as upstream's clusterrole strategy does.
func invalidAggregationSelector(role *rbac.ClusterRole) bool {
	if role.AggregationRule == nil {
		return false
	}
	for i := range role.AggregationRule.ClusterRoleSelectors {
		if len(metav1validation.ValidateLabelSelector(&role.AggregationRule.ClusterRoleSelectors[i],
			metav1validation.LabelSelectorValidationOptions{}, nil)) > 0 {
			return true
		}
	}
	return false
}
