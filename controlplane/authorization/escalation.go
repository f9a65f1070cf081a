package authorization

import (
	"context"
	"errors"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/request"
	rbacvalidation "k8s.io/kubernetes/pkg/registry/rbac/validation"
)

// EscalationCheck is the check upstream's RBAC storage makes on every
// create and update of a role or binding (pkg/registry/rbac/*/policybased):
// a user may only write a role whose rules they hold themselves, and only
// bind a role whose rules they hold, unless they are in system:masters,
// or may `escalate` that role (roles) or `bind` it (bindings). Upstream's
// helpers in pkg/registry/rbac would link its generic registry, so the
// decision is written here around upstream's rule resolver and
// ConfirmNoEscalation, which say what is missing in upstream's words.
//
// It runs as the first validating step of the API server's admission
// (Validate), on the server's v1 objects.
type EscalationCheck struct {
	a *Authorizer
}

// Escalation returns the check for a's rules.
func (a *Authorizer) Escalation() *EscalationCheck { return &EscalationCheck{a: a} }

// Admit changes nothing.
func (e *EscalationCheck) Admit(context.Context, admission.Attributes) error { return nil }

// Validate refuses writes of roles and bindings that would grant what the
// writer does not hold.
func (e *EscalationCheck) Validate(ctx context.Context, a admission.Attributes) error {
	gr := a.GetResource().GroupResource()
	if gr.Group != rbacv1.GroupName || a.GetSubresource() != "" ||
		(a.GetOperation() != admission.Create && a.GetOperation() != admission.Update) {
		return nil
	}
	u := a.GetUserInfo()
	if u == nil || slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup) {
		return nil
	}
	// ConfirmNoEscalation resolves the writer's rules in the namespace of
	// the request, which it reads from the context.
	ctx = request.WithNamespace(request.WithUser(ctx, u), a.GetNamespace())
	if a.GetOperation() == admission.Update && onlyGCFields(a.GetObject(), a.GetOldObject()) {
		return nil
	}
	forbidden := func(err error) error { return apierrors.NewForbidden(gr, a.GetName(), err) }
	// escalate is asked of the request's URL, which names the role only
	// on an update (a create posts to the collection).
	name := ""
	if a.GetOperation() == admission.Update {
		name = a.GetName()
	}
	switch obj := a.GetObject().(type) {
	case *rbacv1.Role:
		if e.allowed(ctx, u, "escalate", gr.Resource, a.GetNamespace(), name) {
			return nil
		}
		if err := rbacvalidation.ConfirmNoEscalation(ctx, e.a.resolver, obj.Rules); err != nil {
			return forbidden(err)
		}
	case *rbacv1.ClusterRole:
		if e.allowed(ctx, u, "escalate", gr.Resource, "", name) {
			return nil
		}
		if err := rbacvalidation.ConfirmNoEscalation(ctx, e.a.resolver, obj.Rules); err != nil {
			return forbidden(err)
		}
		// An aggregation rule can gather anything (and, changed, keep
		// what it gathered from being tightened): it takes * on *.
		old, _ := a.GetOldObject().(*rbacv1.ClusterRole)
		if aggregates(obj) || aggregates(old) {
			if err := rbacvalidation.ConfirmNoEscalation(ctx, e.a.resolver, fullAuthority); err != nil {
				return forbidden(errors.New("must have cluster-admin privileges to use the aggregationRule"))
			}
		}
	case *rbacv1.RoleBinding:
		return e.checkBinding(ctx, u, obj.RoleRef, a.GetNamespace(), forbidden)
	case *rbacv1.ClusterRoleBinding:
		return e.checkBinding(ctx, u, obj.RoleRef, "", forbidden)
	}
	return nil
}

// checkBinding: the writer may bind the role, or holds all its rules.
func (e *EscalationCheck) checkBinding(ctx context.Context, u user.Info, ref rbacv1.RoleRef, ns string, forbidden func(error) error) error {
	resource := map[string]string{"ClusterRole": "clusterroles", "Role": "roles"}[ref.Kind]
	if resource != "" && e.allowedIn(ctx, u, "bind", ref.APIGroup, resource, ns, ref.Name) {
		return nil
	}
	rules, err := e.a.resolver.GetRoleReferenceRules(ctx, ref, ns)
	if err != nil {
		return forbidden(err)
	}
	if err := rbacvalidation.ConfirmNoEscalation(ctx, e.a.resolver, rules); err != nil {
		return forbidden(err)
	}
	return nil
}

// allowed asks the authorizer whether u may verb the role resource/name,
// as upstream's RoleEscalationAuthorized.
func (e *EscalationCheck) allowed(ctx context.Context, u user.Info, verb, resource, ns, name string) bool {
	return e.allowedIn(ctx, u, verb, rbacv1.GroupName, resource, ns, name)
}

func (e *EscalationCheck) allowedIn(ctx context.Context, u user.Info, verb, group, resource, ns, name string) bool {
	d, _, _ := e.a.Authorize(ctx, authorizer.AttributesRecord{User: u, Verb: verb, APIGroup: group, APIVersion: "*",
		Resource: resource, Namespace: ns, Name: name, ResourceRequest: true})
	return d == authorizer.DecisionAllow
}

var fullAuthority = []rbacv1.PolicyRule{
	{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
	{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}},
}

func aggregates(r *rbacv1.ClusterRole) bool {
	return r != nil && r.AggregationRule != nil && len(r.AggregationRule.ClusterRoleSelectors) > 0
}

// onlyGCFields: an update that changes nothing but owner references,
// finalizers and managed fields (the garbage collector's) is never an
// escalation, as upstream's IsOnlyMutatingGCFields.
func onlyGCFields(obj, old runtime.Object) bool {
	if obj == nil || old == nil {
		return false
	}
	c := obj.DeepCopyObject()
	cm, err1 := meta.Accessor(c)
	om, err2 := meta.Accessor(old)
	if err1 != nil || err2 != nil {
		return false
	}
	cm.SetOwnerReferences(om.GetOwnerReferences())
	cm.SetFinalizers(om.GetFinalizers())
	cm.SetManagedFields(om.GetManagedFields())
	cm.SetResourceVersion(om.GetResourceVersion())
	return apiequality.Semantic.DeepEqual(c, old)
}
