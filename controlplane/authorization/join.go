package authorization

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Who joins nodes, and how RBAC lets them.
const (
	// BootstrapNodeGroup is the extra group of the bootstrap tokens
	// `controlplane token create` makes (kubeadm's default-node-token
	// group): its holders may ask for a node client certificate, which
	// the approver then approves.
	BootstrapNodeGroup = "system:bootstrappers:kubeadm:default-node-token"
	// KubeletServingApproverAccount is the ServiceAccount in kube-system
	// of the approver of nodes' serving certificates
	// (controlplane/controllers/servingcsr).
	KubeletServingApproverAccount = "kubelet-serving-approver"
	// ClusterInfo is kube-public's ConfigMap a joining node reads,
	// anonymously, to find the API server and its CA.
	ClusterInfo = "cluster-info"
)

// addJoinPolicy adds what kubeadm's bootstrap-token phase binds: bootstrap
// token holders may create CSRs (system:node-bootstrapper) and have node
// client certificates auto-approved (nodeclient); nodes may renew their own
// (selfnodeclient); anyone may read cluster-info. And the serving
// certificate approver's role.
func addJoinPolicy(p *Policy, meta func(name, ns string) metav1.ObjectMeta) {
	group := func(name string) []rbacv1.Subject {
		return []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: name}}
	}
	binding := func(name, role string, subjects []rbacv1.Subject) rbacv1.ClusterRoleBinding {
		return rbacv1.ClusterRoleBinding{ObjectMeta: meta(name, ""),
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}, Subjects: subjects}
	}
	p.ClusterRoleBindings = append(p.ClusterRoleBindings,
		binding("kubeadm:kubelet-bootstrap", "system:node-bootstrapper", group(BootstrapNodeGroup)),
		binding("kubeadm:node-autoapprove-bootstrap", "system:certificates.k8s.io:certificatesigningrequests:nodeclient", group(BootstrapNodeGroup)),
		binding("kubeadm:node-autoapprove-certificate-rotation", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", group("system:nodes")))

	const clusterInfoRole = "kubeadm:bootstrap-signer-clusterinfo"
	p.Roles = append(p.Roles, rbacv1.Role{ObjectMeta: meta(clusterInfoRole, metav1.NamespacePublic),
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"configmaps"},
			ResourceNames: []string{ClusterInfo}}}})
	p.RoleBindings = append(p.RoleBindings, rbacv1.RoleBinding{ObjectMeta: meta(clusterInfoRole, metav1.NamespacePublic),
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: clusterInfoRole},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "system:anonymous"}}})

	approver := "system:controller:" + KubeletServingApproverAccount
	p.ClusterRoles = append(p.ClusterRoles, rbacv1.ClusterRole{ObjectMeta: meta(approver, ""), Rules: []rbacv1.PolicyRule{
		{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}},
		{Verbs: []string{"update"}, APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests/approval"}},
		{Verbs: []string{"approve"}, APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"signers"},
			ResourceNames: []string{"kubernetes.io/kubelet-serving"}},
		{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"nodes"}},
		{Verbs: []string{"create", "update", "patch"}, APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}},
	}})
	p.ClusterRoleBindings = append(p.ClusterRoleBindings, binding(approver, approver,
		[]rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: KubeletServingApproverAccount, Namespace: metav1.NamespaceSystem}}))
}
