// Package authorization is kube-apiserver's authorization with
// --authorization-mode=Node,RBAC: upstream's Node authorizer
// (plugin/pkg/auth/authorizer/node: a node reads only the Secrets,
// ConfigMaps, claims, volumes and ServiceAccount tokens of pods bound to
// it, from a graph fed by pod, node, volume and attachment informers) and
// RBAC authorizer (plugin/pkg/auth/authorizer/rbac, on informers of the
// four RBAC kinds), behind the privileged group system:masters;
// upstream's bootstrap policy, reconciled at start as
// kube-apiserver's rbac/bootstrap-roles post-start hook does; and the
// escalation check upstream's RBAC storage makes on every write of a role
// or binding.
//
// Only the control plane imports this package.
package authorization

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/union"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/kubernetes/pkg/auth/nodeidentifier"
	rbacvalidation "k8s.io/kubernetes/pkg/registry/rbac/validation"
	"k8s.io/kubernetes/plugin/pkg/auth/authorizer/node"
	"k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac"
	"k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac/bootstrappolicy"
)

// Authorizer decides every request: members of system:masters may do
// anything (upstream's privileged-group authorizer, which kube-apiserver
// puts first), nodes what the Node authorizer allows, everyone (nodes
// too) what RBAC grants them.
type Authorizer struct {
	chain    authorizer.Authorizer
	rbac     *rbac.RBACAuthorizer
	resolver *rbacvalidation.DefaultRuleResolver
	nodes    nodeidentifier.NodeIdentifier
	synced   []cache.InformerSynced
}

// New registers the RBAC informers on f (the caller starts it) and builds
// the authorizer on their listers.
func New(f informers.SharedInformerFactory) (*Authorizer, error) {
	r := f.Rbac().V1()
	roles := &rbac.RoleGetter{Lister: r.Roles().Lister()}
	bindings := &rbac.RoleBindingLister{Lister: r.RoleBindings().Lister()}
	clusterRoles := &rbac.ClusterRoleGetter{Lister: r.ClusterRoles().Lister()}
	clusterBindings := &rbac.ClusterRoleBindingLister{Lister: r.ClusterRoleBindings().Lister()}
	rb := rbac.New(roles, bindings, clusterRoles, clusterBindings)
	graph := node.NewGraph()
	core := f.Core().V1()
	// No ResourceSlices or PodCertificateRequests are served: their edges
	// stay out of the graph, as upstream leaves them out when the
	// resources are disabled.
	node.AddGraphEventHandlers(graph, core.Nodes(), core.Pods(), core.PersistentVolumes(),
		f.Storage().V1().VolumeAttachments(), nil, nil)
	identifier := nodeidentifier.NewDefaultNodeIdentifier()
	nodes := node.NewAuthorizer(graph, identifier, bootstrappolicy.NodeRules())
	// kube-apiserver's names for them, which prefix the reasons of a
	// refusal ("node: no relationship found ...").
	chain, err := union.New(union.NamedAuthorizer{AuthorizerName: "kubernetes.io/system-privileged-group", Authorizer: privilegedGroup},
		union.NamedAuthorizer{AuthorizerName: "node", Authorizer: nodes},
		union.NamedAuthorizer{AuthorizerName: "rbac", Authorizer: rb})
	if err != nil {
		return nil, fmt.Errorf("authorizer: %w", err)
	}
	return &Authorizer{
		chain:    chain,
		rbac:     rb,
		nodes:    identifier,
		resolver: rbacvalidation.NewDefaultRuleResolver(roles, bindings, clusterRoles, clusterBindings),
		synced: []cache.InformerSynced{r.Roles().Informer().HasSynced, r.RoleBindings().Informer().HasSynced,
			r.ClusterRoles().Informer().HasSynced, r.ClusterRoleBindings().Informer().HasSynced,
			core.Nodes().Informer().HasSynced, core.Pods().Informer().HasSynced,
			core.PersistentVolumes().Informer().HasSynced, f.Storage().V1().VolumeAttachments().Informer().HasSynced},
	}, nil
}

// Authorize implements authorizer.Authorizer.
func (a *Authorizer) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	return a.chain.Authorize(ctx, attrs)
}

// ConditionsAwareAuthorize implements authorizer.Authorizer.
func (a *Authorizer) ConditionsAwareAuthorize(ctx context.Context, attrs authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return a.chain.ConditionsAwareAuthorize(ctx, attrs)
}

// EvaluateConditions implements authorizer.Authorizer.
func (a *Authorizer) EvaluateConditions(ctx context.Context, d authorizer.ConditionsAwareDecision, data authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return a.chain.EvaluateConditions(ctx, d, data)
}

// RulesFor implements authorizer.RuleResolver (SelfSubjectRulesReview):
// system:masters may do everything, as upstream's privileged-group
// resolver reports.
func (a *Authorizer) RulesFor(ctx context.Context, u user.Info, namespace string) ([]authorizer.ResourceRuleInfo, []authorizer.NonResourceRuleInfo, bool, error) {
	if slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup) {
		return []authorizer.ResourceRuleInfo{&authorizer.DefaultResourceRuleInfo{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}},
			[]authorizer.NonResourceRuleInfo{&authorizer.DefaultNonResourceRuleInfo{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}}, false, nil
	}
	rules, nonResource, incomplete, err := a.rbac.RulesFor(ctx, u, namespace)
	// The Node authorizer lists no rules: a node's list is incomplete, as
	// upstream's resolver for it says.
	if _, isNode := a.nodes.NodeIdentity(u); isNode {
		incomplete = true
	}
	return rules, nonResource, incomplete, err
}

// Synced reports an error until the informers have listed once: before
// that RBAC would refuse everyone but system:masters, and the Node
// authorizer every node. It is part of the API server's /readyz.
func (a *Authorizer) Synced() error {
	for _, s := range a.synced {
		if !s() {
			return fmt.Errorf("the authorizers' informers have not synced")
		}
	}
	return nil
}

// privilegedGroup allows members of system:masters everything and has no
// opinion on anyone else, as upstream's authorizerfactory.NewPrivilegedGroups
// (whose package would link the webhook authorizer and tracing).
var privilegedGroup = authorizer.AuthorizerFunc(func(_ context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	if u := attrs.GetUser(); u != nil && slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup) {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
})
