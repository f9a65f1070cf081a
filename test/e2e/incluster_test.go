package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/hosttools"
	"github.com/nodelet/nodelet/test/testkit"
)

// testInClusterClient runs a client-go program in a pod on the lab's
// node2 (the host's kubectl, a static binary, mounted by hostPath) with
// in-cluster configuration and nothing else: the projected volume upstream's
// ServiceAccount admission plugin adds to the pod as it is created (a token
// of the default account bound to the pod, kube-root-ca.crt, the
// namespace; the manifest names none) at the path client-go reads, and
// the KUBERNETES_SERVICE_HOST/PORT the node sets. The kubernetes Service's
// rules and the API server's certificate (which names the service IP) let
// it in, and it is the ServiceAccount, bound to its pod: it lists the pods
// its Role lets it read and is refused the Secrets, in upstream's words.
func testInClusterClient(t *testing.T, e *labEnv) {
	kubectl, err := hosttools.Path("kubectl")
	if err == nil {
		kubectl, err = filepath.EvalSymlinks(kubectl)
	}
	if err != nil {
		t.Fatal(err)
	}
	// RBAC lets the default account read pods in default, nothing more.
	e.cp.must("create", "role", "incluster-pod-reader", "--verb=get,list", "--resource=pods")
	e.cp.must("create", "rolebinding", "incluster-pod-reader", "--role=incluster-pod-reader", "--serviceaccount=default:default")
	defer e.cp.kubectl("delete", "rolebinding,role", "incluster-pod-reader")
	pod := fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: incluster}
spec:
  nodeName: node2
  restartPolicy: Never
  terminationGracePeriodSeconds: 0
  containers:
  - name: client
    image: busybox:1.36
    imagePullPolicy: IfNotPresent
    command:
    - sh
    - -c
    - |
      k() { /opt/kubectl --cache-dir /tmp/kube-cache "$@"; }
      k auth whoami -o 'jsonpath={.status.userInfo.username} {.status.userInfo.extra.authentication\.kubernetes\.io/pod-name}'
      echo
      k get pods -o name; echo "pods rc=$?"
      k get secrets 2>&1; echo "secrets rc=$?"
    volumeMounts:
    - {name: kubectl, mountPath: /opt/kubectl, readOnly: true}
  volumes:
  - name: kubectl
    hostPath: {path: %s, type: File}
`, kubectl)
	e.cp.mustStdin(pod, "apply", "-f", "-")
	defer e.cp.kubectl("delete", "pod", "incluster", "--grace-period=0", "--force")
	var phase string
	testkit.Eventually(t, 90*time.Second, "the in-cluster client pod to finish", func() bool {
		phase, _, _ = e.cp.kubectl("get", "pod", "incluster", "-o", "jsonpath={.status.phase}")
		return phase == "Succeeded" || phase == "Failed"
	})
	out, _, _ := e.cp.kubectl("logs", "incluster")
	for _, want := range []string{
		`system:serviceaccount:default:default ["incluster"]`,
		"pod/incluster\n",
		"pods rc=0",
		`secrets is forbidden: User "system:serviceaccount:default:default" cannot list resource "secrets" in API group "" in the namespace "default"`,
		"secrets rc=1",
	} {
		if phase != "Succeeded" || !strings.Contains(out, want) {
			t.Fatalf("in-cluster kubectl (%s) lacks %q:\n%s", phase, want, out)
		}
	}
	t.Logf("a pod's kubectl reached the API server in-cluster as its account, listed pods and was refused secrets:\n%s", out)
}
