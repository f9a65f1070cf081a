package authorization

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/component-helpers/auth/rbac/reconciliation"
	"k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac/bootstrappolicy"
)

// Identities of the control plane's own components and the names their
// RBAC grants use. The controllers run as ServiceAccounts of kube-system,
// the names upstream's kube-controller-manager gives them with
// --use-service-account-credentials, so upstream's controller roles
// (system:controller:NAME) apply unchanged.
const (
	ControllerManagerUser = "system:kube-controller-manager"
	SchedulerUser         = "system:kube-scheduler"
	// APIServerKubeletClientUser is who the API server is to the nodes
	// (controlplane/nodeclient.APIServerUser).
	APIServerKubeletClientUser = "kube-apiserver-kubelet-client"
	// LeaderLease is the Lease in kube-system the leader holds.
	LeaderLease = "nodelet-controlplane"
	// LocalPathAccount is the built-in local provisioner's ServiceAccount
	// in kube-system (controlplane/controllers/localpath).
	LocalPathAccount = "local-path-provisioner"
)

// Policy is the RBAC policy reconciled at every start.
type Policy struct {
	ClusterRoles        []rbacv1.ClusterRole
	ClusterRoleBindings []rbacv1.ClusterRoleBinding
	Roles               []rbacv1.Role
	RoleBindings        []rbacv1.RoleBinding
}

// DefaultPolicy is upstream's bootstrap policy (the cluster roles and
// bindings, the controller roles, the kube-system and kube-public roles)
// plus what this control plane's shape needs beyond it:
//   - the leader's Lease is nodelet-controlplane, not upstream's
//     kube-controller-manager: a Role lets the controller manager's user
//     get and update it;
//   - one endpoints controller writes both Endpoints and EndpointSlices,
//     which upstream splits over two accounts: its account is bound to both
//     roles;
//   - the API server calls the nodes as kube-apiserver-kubelet-client,
//     bound to system:kubelet-api-admin, as kubeadm binds it;
//   - the nodelet is also its node's kube-proxy and cluster DNS: the group
//     system:nodes is bound to system:node-proxier (Services,
//     EndpointSlices), which upstream binds to kube-proxy's user;
//   - the built-in local provisioner (LocalPathAccount) makes and deletes
//     volumes, reads claims, classes and nodes and writes the cleanup list
//     on a node, as an external provisioner's role allows;
//   - nodes join by bootstrap token, as kubeadm binds it (addJoinPolicy).
func DefaultPolicy() Policy {
	p := Policy{
		ClusterRoles:        append(bootstrappolicy.ClusterRoles(), bootstrappolicy.ControllerRoles()...),
		ClusterRoleBindings: append(bootstrappolicy.ClusterRoleBindings(), bootstrappolicy.ControllerRoleBindings()...),
	}
	for _, ns := range sortedKeys(bootstrappolicy.NamespaceRoles()) {
		p.Roles = append(p.Roles, bootstrappolicy.NamespaceRoles()[ns]...)
	}
	for _, ns := range sortedKeys(bootstrappolicy.NamespaceRoleBindings()) {
		p.RoleBindings = append(p.RoleBindings, bootstrappolicy.NamespaceRoleBindings()[ns]...)
	}
	meta := func(name, ns string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels:      map[string]string{"app.kubernetes.io/managed-by": "nodelet"},
			Annotations: map[string]string{rbacv1.AutoUpdateAnnotationKey: "true"}}
	}
	p.Roles = append(p.Roles, rbacv1.Role{ObjectMeta: meta("system:nodelet:leader-locking-controlplane", metav1.NamespaceSystem),
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "update"}, APIGroups: []string{"coordination.k8s.io"},
			Resources: []string{"leases"}, ResourceNames: []string{LeaderLease}}}})
	p.RoleBindings = append(p.RoleBindings, rbacv1.RoleBinding{ObjectMeta: meta("system:nodelet:leader-locking-controlplane", metav1.NamespaceSystem),
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "system:nodelet:leader-locking-controlplane"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: ControllerManagerUser}}})
	p.ClusterRoleBindings = append(p.ClusterRoleBindings,
		rbacv1.ClusterRoleBinding{ObjectMeta: meta("system:nodelet:endpoint-controller-slices", ""),
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:controller:endpointslice-controller"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "endpoint-controller", Namespace: metav1.NamespaceSystem}}},
		rbacv1.ClusterRoleBinding{ObjectMeta: meta("system:nodelet:kube-apiserver-kubelet-client", ""),
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:kubelet-api-admin"},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: APIServerKubeletClientUser}}},
		rbacv1.ClusterRoleBinding{ObjectMeta: meta("system:nodelet:node-proxier", ""),
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node-proxier"},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:nodes"}}})
	lp := "system:controller:" + LocalPathAccount
	p.ClusterRoles = append(p.ClusterRoles, rbacv1.ClusterRole{ObjectMeta: meta(lp, ""), Rules: []rbacv1.PolicyRule{
		{Verbs: []string{"get", "list", "watch", "create", "delete"}, APIGroups: []string{""}, Resources: []string{"persistentvolumes"}},
		{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}},
		{Verbs: []string{"get", "list", "watch", "update"}, APIGroups: []string{""}, Resources: []string{"nodes"}},
		{Verbs: []string{"get", "list", "watch", "create"}, APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses"}},
		{Verbs: []string{"create", "update", "patch"}, APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}},
	}})
	p.ClusterRoleBindings = append(p.ClusterRoleBindings, rbacv1.ClusterRoleBinding{ObjectMeta: meta(lp, ""),
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: lp},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: LocalPathAccount, Namespace: metav1.NamespaceSystem}}})
	addJoinPolicy(&p, meta)
	return p
}

// Bootstrapper reconciles a Policy: missing roles and bindings are
// created, missing rules and subjects added, what users added kept, and
// objects annotated rbac.authorization.kubernetes.io/autoupdate=false left
// alone, as kube-apiserver's rbac/bootstrap-roles hook does
// (k8s.io/component-helpers/auth/rbac/reconciliation).
type Bootstrapper struct {
	client kubernetes.Interface
	policy Policy
	log    *slog.Logger
	done   atomic.Bool
}

// NewBootstrapper reconciles policy through client (a loopback client of
// system:masters).
func NewBootstrapper(client kubernetes.Interface, policy Policy, log *slog.Logger) *Bootstrapper {
	return &Bootstrapper{client: client, policy: policy, log: log.With("component", "rbac-bootstrap")}
}

// Run reconciles until everything is in place (retrying every second
// while the API server is not yet answering), then returns.
func (b *Bootstrapper) Run(ctx context.Context) error {
	start := time.Now()
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		if err := b.reconcile(); err != nil {
			b.log.Debug("reconcile the bootstrap policy", "err", err)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("rbac bootstrap policy: %w", err)
	}
	b.done.Store(true)
	b.log.Info("bootstrap policy reconciled", "clusterRoles", len(b.policy.ClusterRoles),
		"clusterRoleBindings", len(b.policy.ClusterRoleBindings), "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// Done reports an error until the policy has been reconciled once: part
// of /readyz, as upstream's poststarthook/rbac/bootstrap-roles.
func (b *Bootstrapper) Done() error {
	if !b.done.Load() {
		return errors.New("the RBAC bootstrap policy is not reconciled yet")
	}
	return nil
}

// reconcile makes one pass over the policy; it tries every object and
// returns the errors together. (Upstream's reconciliation calls the API
// without a context; a pass ends within the retries' backoff.)
func (b *Bootstrapper) reconcile() error {
	rbac := b.client.RbacV1()
	var errs []error
	run := func(what string, f func() error) {
		err := retry.OnError(retry.DefaultBackoff, retryable, f)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
		}
	}
	for i := range b.policy.ClusterRoles {
		r := &b.policy.ClusterRoles[i]
		run("clusterrole "+r.Name, b.roleRun(reconciliation.ReconcileRoleOptions{Confirm: true,
			Role: reconciliation.ClusterRoleRuleOwner{ClusterRole: r}, Client: reconciliation.ClusterRoleModifier{Client: rbac.ClusterRoles()}}))
	}
	for i := range b.policy.ClusterRoleBindings {
		rb := &b.policy.ClusterRoleBindings[i]
		run("clusterrolebinding "+rb.Name, b.bindingRun(reconciliation.ReconcileRoleBindingOptions{Confirm: true,
			RoleBinding: reconciliation.ClusterRoleBindingAdapter{ClusterRoleBinding: rb},
			Client:      reconciliation.ClusterRoleBindingClientAdapter{Client: rbac.ClusterRoleBindings()}}))
	}
	for i := range b.policy.Roles {
		r := &b.policy.Roles[i]
		run("role "+r.Namespace+"/"+r.Name, b.roleRun(reconciliation.ReconcileRoleOptions{Confirm: true,
			Role:   reconciliation.RoleRuleOwner{Role: r},
			Client: reconciliation.RoleModifier{Client: rbac, NamespaceClient: b.client.CoreV1().Namespaces()}}))
	}
	for i := range b.policy.RoleBindings {
		rb := &b.policy.RoleBindings[i]
		run("rolebinding "+rb.Namespace+"/"+rb.Name, b.bindingRun(reconciliation.ReconcileRoleBindingOptions{Confirm: true,
			RoleBinding: reconciliation.RoleBindingAdapter{RoleBinding: rb},
			Client:      reconciliation.RoleBindingClientAdapter{Client: rbac, NamespaceClient: b.client.CoreV1().Namespaces()}}))
	}
	return errors.Join(errs...)
}

// retryable: a conflict (someone else wrote in between) or an API server
// not serving yet, as upstream's hook retries.
func retryable(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsServiceUnavailable(err)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func (b *Bootstrapper) roleRun(opts reconciliation.ReconcileRoleOptions) func() error {
	return func() error {
		res, err := opts.Run()
		if err == nil && res.Protected && res.Operation != reconciliation.ReconcileNone {
			b.log.Warn("skipped a reconcile-protected role with missing permissions", "role", res.Role.GetName(),
				"namespace", res.Role.GetNamespace(), "missing", len(res.MissingRules))
		}
		return err
	}
}

func (b *Bootstrapper) bindingRun(opts reconciliation.ReconcileRoleBindingOptions) func() error {
	return func() error {
		res, err := opts.Run()
		if err == nil && res.Protected && res.Operation != reconciliation.ReconcileNone {
			b.log.Warn("skipped a reconcile-protected binding with missing subjects", "binding", res.RoleBinding.GetName(),
				"namespace", res.RoleBinding.GetNamespace(), "missing", len(res.MissingSubjects))
		}
		return err
	}
}
