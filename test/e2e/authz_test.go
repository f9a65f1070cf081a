package e2e

import (
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/testkit"
)

// userKubeconfig writes a kubeconfig for user in groups (a client
// certificate of the cluster CA, `controlplane kubeconfig`) and returns a
// kubectl runner that uses it.
func userKubeconfig(t *testing.T, cp *controlPlane, user string, groups ...string) *controlPlane {
	t.Helper()
	args := []string{"kubeconfig", "--data-dir", cp.dataDir, "--user", user}
	for _, g := range groups {
		args = append(args, "--group", g)
	}
	kc, err := exec.Command(filepath.Join(binDir, "controlplane"), args...).Output()
	if err != nil {
		t.Fatalf("controlplane kubeconfig --user %s: %v", user, err)
	}
	file := filepath.Join(t.TempDir(), user+".kubeconfig")
	if err := os.WriteFile(file, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	as := *cp
	as.kubeconfig = file
	return &as
}

// tokenKubeconfig is a kubectl runner that authenticates with a bearer
// token alone, or with nothing when token is "" (the user entry then names
// a basic-auth user, which no authenticator accepts: otherwise kubectl
// would prompt for one).
func tokenKubeconfig(t *testing.T, cp *controlPlane, token string) *controlPlane {
	t.Helper()
	file := filepath.Join(t.TempDir(), "token.kubeconfig")
	userEntry := fmt.Sprintf("{token: %q}", token)
	if token == "" {
		userEntry = "{username: nobody}"
	}
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:%d", certificate-authority: %q}}]
users: [{name: u, user: %s}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, cp.port, filepath.Join(cp.dataDir, "ca.crt"), userEntry)
	if err := os.WriteFile(file, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	as := *cp
	as.kubeconfig = file
	return &as
}

// authzCase is one request by one identity: allowed, or refused with
// upstream's message (a substring of kubectl's stderr).
type authzCase struct {
	who     string
	as      *controlPlane
	args    []string
	refused string // "" when allowed
}

func runAuthzCases(t *testing.T, cases []authzCase) {
	t.Helper()
	for _, c := range cases {
		out, errOut, err := c.as.kubectl(c.args...)
		switch {
		case c.refused == "" && err != nil:
			t.Errorf("%s: kubectl %s: refused, want allowed: %v\n%s%s", c.who, strings.Join(c.args, " "), err, out, errOut)
		case c.refused != "" && err == nil:
			t.Errorf("%s: kubectl %s: allowed, want refused\n%s", c.who, strings.Join(c.args, " "), out)
		case c.refused != "" && !strings.Contains(errOut, c.refused):
			t.Errorf("%s: kubectl %s: %s\nwant the message %q", c.who, strings.Join(c.args, " "), errOut, c.refused)
		}
	}
}

// TestAuthorizationMatrix: RBAC with upstream's bootstrap roles and the
// Node authorizer decide for each identity through the real kubectl, with
// upstream's 403 wording: a node (only the Secrets of its own pods, only
// its own pods listed; NodeRestriction: only its own Node, not labelled
// into node-restriction.kubernetes.io/, only its own pods deleted, tokens
// only for its pods), a user bound to view in one namespace, one bound
// to edit, a
// ServiceAccount by token bound to a Role, impersonation (allowed for
// system:masters, refused to others), anonymous requests (401 by default),
// and escalation (a user who may write Roles may not grant what they lack).
func TestAuthorizationMatrix(t *testing.T) {
	dir := t.TempDir()
	cp := startControlPlane(t, dir, freePort(t))
	cp.must("create", "namespace", "team")
	cp.must("create", "rolebinding", "vera-view", "-n", "team", "--clusterrole=view", "--user=vera")
	cp.must("create", "rolebinding", "ed-edit", "-n", "team", "--clusterrole=edit", "--user=ed")
	cp.must("create", "serviceaccount", "robot", "-n", "team")
	cp.must("create", "role", "pod-reader", "-n", "team", "--verb=get,list", "--resource=pods")
	cp.must("create", "rolebinding", "robot-reads", "-n", "team", "--role=pod-reader", "--serviceaccount=team:robot")
	// rita may write Roles in team and read pods there, nothing else.
	cp.must("create", "role", "role-writer", "-n", "team", "--verb=create,get,list", "--resource=roles,pods")
	cp.must("create", "rolebinding", "rita", "-n", "team", "--role=role-writer", "--user=rita")

	// Two nodes (objects only) with a pod each, each pod using a Secret.
	for _, n := range []string{"node-a", "node-b"} {
		cp.mustStdin(fmt.Sprintf(`{"apiVersion": "v1", "kind": "Node", "metadata": {"name": %q}}`, n), "create", "-f", "-")
		cp.must("create", "secret", "generic", "secret-of-"+n, "--from-literal=k=v")
		cp.mustStdin(fmt.Sprintf(`{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pod-on-%[1]s"},
  "spec": {"nodeName": %[1]q, "containers": [{"name": "c", "image": "busybox",
    "env": [{"name": "K", "valueFrom": {"secretKeyRef": {"name": "secret-of-%[1]s", "key": "k"}}}]}]}}`, n), "create", "-f", "-")
	}
	nodeA := userKubeconfig(t, cp, "system:node:node-a", "system:nodes")

	// nina may read one ConfigMap of team by name, also as a list or
	// watch selecting that name.
	cp.must("create", "configmap", "x", "-n", "team")
	cp.must("create", "role", "cm-x", "-n", "team", "--verb=get,list,watch", "--resource=configmaps", "--resource-name=x")
	cp.must("create", "rolebinding", "nina", "-n", "team", "--role=cm-x", "--user=nina")
	cp.must("create", "serviceaccount", "other")
	nina := userKubeconfig(t, cp, "nina")

	vera := userKubeconfig(t, cp, "vera")
	ed := userKubeconfig(t, cp, "ed")
	rita := userKubeconfig(t, cp, "rita")
	robot := tokenKubeconfig(t, cp, strings.TrimSpace(cp.must("create", "token", "robot", "-n", "team", "--duration=10m")))
	// A legacy token: the Secret a user creates for the account, filled by
	// the tokens controller.
	cp.mustStdin(`{"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
  "metadata": {"name": "robot-token", "namespace": "team", "annotations": {"kubernetes.io/service-account.name": "robot"}}}`,
		"create", "-f", "-")
	var legacyToken string
	testkit.Eventually(t, 30*time.Second, "the tokens controller fills robot-token", func() bool {
		out, _, err := cp.kubectl("get", "secret", "robot-token", "-n", "team", "-o", "jsonpath={.data.token}")
		if err != nil || out == "" {
			return false
		}
		tok, err := base64.StdEncoding.DecodeString(strings.TrimSpace(out))
		legacyToken = string(tok)
		return err == nil
	})
	legacyRobot := tokenKubeconfig(t, cp, legacyToken)
	anonymous := tokenKubeconfig(t, cp, "")

	runAuthzCases(t, []authzCase{
		{"admin", cp, []string{"get", "secrets", "-A"}, ""},
		{"vera (view in team)", vera, []string{"get", "pods", "-n", "team"}, ""},
		{"vera (view in team)", vera, []string{"get", "deployments,services,configmaps", "-n", "team"}, ""},
		{"vera (view in team)", vera, []string{"get", "secrets", "-n", "team"},
			`secrets is forbidden: User "vera" cannot list resource "secrets" in API group "" in the namespace "team"`},
		{"vera (view in team)", vera, []string{"create", "configmap", "c", "-n", "team"},
			`configmaps is forbidden: User "vera" cannot create resource "configmaps" in API group "" in the namespace "team"`},
		{"vera (view in team)", vera, []string{"get", "pods", "-n", "default"},
			`pods is forbidden: User "vera" cannot list resource "pods" in API group "" in the namespace "default"`},
		{"vera (view in team)", vera, []string{"get", "nodes"},
			`nodes is forbidden: User "vera" cannot list resource "nodes" in API group "" at the cluster scope`},
		{"ed (edit in team)", ed, []string{"create", "configmap", "c", "-n", "team", "--from-literal=k=v"}, ""},
		{"ed (edit in team)", ed, []string{"get", "secrets", "-n", "team"}, ""},
		{"ed (edit in team)", ed, []string{"create", "rolebinding", "x", "-n", "team", "--clusterrole=view", "--user=ed"},
			`rolebindings.rbac.authorization.k8s.io is forbidden: User "ed" cannot create resource "rolebindings" in API group "rbac.authorization.k8s.io" in the namespace "team"`},
		{"ed (edit in team)", ed, []string{"delete", "namespace", "team"},
			`namespaces "team" is forbidden: User "ed" cannot delete resource "namespaces" in API group "" in the namespace "team"`},
		{"vera (view in team)", vera, []string{"get", "namespace", "team"}, ""},
		{"robot (token)", robot, []string{"get", "pods", "-n", "team"}, ""},
		{"robot (token)", robot, []string{"get", "pods", "-n", "default"},
			`pods is forbidden: User "system:serviceaccount:team:robot" cannot list resource "pods" in API group "" in the namespace "default"`},
		{"robot (token)", robot, []string{"delete", "pod", "nothing", "-n", "team"},
			`pods "nothing" is forbidden: User "system:serviceaccount:team:robot" cannot delete resource "pods" in API group "" in the namespace "team"`},
		{"robot (legacy Secret token)", legacyRobot, []string{"get", "pods", "-n", "team"}, ""},
		{"robot (legacy Secret token)", legacyRobot, []string{"get", "pods", "-n", "default"},
			`pods is forbidden: User "system:serviceaccount:team:robot" cannot list resource "pods" in API group "" in the namespace "default"`},
		{"admin as vera", cp, []string{"--as", "vera", "create", "configmap", "d", "-n", "team"},
			`configmaps is forbidden: User "vera" cannot create resource "configmaps" in API group "" in the namespace "team"`},
		{"admin as vera", cp, []string{"--as", "vera", "get", "pods", "-n", "team"}, ""},
		{"vera as ed", vera, []string{"--as", "ed", "get", "secrets", "-n", "team"},
			`users "ed" is forbidden: User "vera" cannot impersonate resource "users" in API group "" at the cluster scope`},
		{"anonymous", anonymous, []string{"get", "pods"}, "Unauthorized"},
		{"nina (one ConfigMap by name)", nina, []string{"get", "configmap", "x", "-n", "team"}, ""},
		{"nina (one ConfigMap by name)", nina, []string{"get", "configmaps", "-n", "team", "--field-selector", "metadata.name=x"}, ""},
		{"nina (one ConfigMap by name)", nina, []string{"get", "configmaps", "-n", "team"},
			`configmaps is forbidden: User "nina" cannot list resource "configmaps" in API group "" in the namespace "team"`},
		{"admin", cp, []string{"create", "token", "other", "--bound-object-kind=Pod", "--bound-object-name=pod-on-node-a"},
			`cannot bind token for serviceaccount "other" to pod running with different serviceaccount name.`},
		{"node A", nodeA, []string{"get", "secret", "secret-of-node-a"}, ""},
		{"node A", nodeA, []string{"get", "secret", "secret-of-node-b"},
			`secrets "secret-of-node-b" is forbidden: User "system:node:node-a" cannot get resource "secrets" in API group "" in the namespace "default": node: no relationship found between node 'node-a' and this object`},
		{"node A", nodeA, []string{"get", "secrets"},
			`secrets is forbidden: User "system:node:node-a" cannot list resource "secrets" in API group "" in the namespace "default"`},
		{"node A", nodeA, []string{"get", "pods", "-A", "--field-selector", "spec.nodeName=node-a"}, ""},
		{"node A", nodeA, []string{"get", "pods", "-A"},
			`pods is forbidden: User "system:node:node-a" cannot list resource "pods" in API group "" at the cluster scope: node: can only list/watch pods with spec.nodeName field selector`},
		{"node A", nodeA, []string{"label", "node", "node-a", "topology.kubernetes.io/zone=z1"}, ""},
		{"node A", nodeA, []string{"label", "node", "node-b", "topology.kubernetes.io/zone=z1"},
			`nodes "node-b" is forbidden: node "node-a" is not allowed to modify node "node-b"`},
		{"node A", nodeA, []string{"label", "node", "node-a", "node-restriction.kubernetes.io/trusted=yes"},
			`is not allowed to modify labels: node-restriction.kubernetes.io/trusted`},
		{"node A", nodeA, []string{"delete", "pod", "pod-on-node-b", "--wait=false"},
			`pods "pod-on-node-b" is forbidden: node "node-a" can only delete pods with spec.nodeName set to itself`},
		{"node A", nodeA, []string{"create", "token", "default"}, `node requested token not bound to a pod`},
		{"node A", nodeA, []string{"create", "token", "default", "--bound-object-kind=Pod", "--bound-object-name=pod-on-node-b",
			"--bound-object-uid=" + cp.must("get", "pod", "pod-on-node-b", "-o", "jsonpath={.metadata.uid}")},
			`node requested token bound to a pod scheduled on a different node`},
		{"node A", nodeA, []string{"create", "token", "default", "--bound-object-kind=Pod", "--bound-object-name=pod-on-node-a",
			"--bound-object-uid=" + cp.must("get", "pod", "pod-on-node-a", "-o", "jsonpath={.metadata.uid}")}, ""},
		{"node A", nodeA, []string{"create", "token", "robot", "-n", "team"},
			`serviceaccounts "robot" is forbidden: User "system:node:node-a" cannot create resource "serviceaccounts/token" in API group "" in the namespace "team": node: no relationship found between node 'node-a' and this object`},
		{"rita (may write Roles)", rita, []string{"create", "role", "reader", "-n", "team", "--verb=get", "--resource=pods"}, ""},
		{"rita (may write Roles)", rita, []string{"create", "role", "thief", "-n", "team", "--verb=get", "--resource=secrets"},
			`roles.rbac.authorization.k8s.io "thief" is forbidden: user "rita" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:`},
	})

	// kubectl auth can-i, with --as and --list, answers as the requests did.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"auth", "can-i", "list", "pods", "-n", "team", "--as", "vera"}, "yes"},
		{[]string{"auth", "can-i", "list", "secrets", "-n", "team", "--as", "vera"}, "no"},
		{[]string{"auth", "can-i", "create", "deployments.apps", "-n", "team", "--as", "ed"}, "yes"},
		{[]string{"auth", "can-i", "get", "pods", "-n", "team", "--as", "system:serviceaccount:team:robot"}, "yes"},
	} {
		if out, _, _ := cp.kubectl(c.args...); strings.TrimSpace(out) != c.want {
			t.Errorf("kubectl %s: %q, want %q", strings.Join(c.args, " "), out, c.want)
		}
	}
	list, _, err := vera.kubectl("auth", "can-i", "--list", "-n", "team")
	if err != nil || !strings.Contains(list, "pods ") || strings.Contains(list, "secrets ") {
		t.Errorf("vera: kubectl auth can-i --list -n team: %v\n%s", err, list)
	}
}
