package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodelet/nodelet/hosttools"
)

// testInClusterClient runs a client-go program in a pod on the lab's
// node2 (the host's kubectl, a static binary, mounted by hostPath) with a
// kubeconfig naming https://kubernetes.default.svc: the cluster DNS, the
// kubernetes Service's rules and the API server's certificate (which names
// kubernetes.default.svc) let it in. A kubeconfig stands in for the
// service account token until the security work brings one.
func testInClusterClient(t *testing.T, e *labEnv) {
	kubectl, err := hosttools.Path("kubectl")
	if err == nil {
		kubectl, err = filepath.EvalSymlinks(kubectl)
	}
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.LoadFromFile(e.state.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		c.Server = "https://kubernetes.default.svc"
	}
	kc := filepath.Join(t.TempDir(), "config")
	if err := clientcmd.WriteToFile(*cfg, kc); err != nil {
		t.Fatal(err)
	}
	e.cp.must("create", "secret", "generic", "incluster", "--from-file=config="+kc)
	defer e.cp.kubectl("delete", "secret", "incluster")
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
    command: [/opt/kubectl, --kubeconfig, /kube/config, --cache-dir, /tmp/kube-cache, get, --raw, /version]
    volumeMounts:
    - {name: kubectl, mountPath: /opt/kubectl, readOnly: true}
    - {name: kube, mountPath: /kube, readOnly: true}
  volumes:
  - name: kubectl
    hostPath: {path: %s, type: File}
  - name: kube
    secret: {secretName: incluster}
`, kubectl)
	e.cp.mustStdin(pod, "apply", "-f", "-")
	defer e.cp.kubectl("delete", "pod", "incluster", "--grace-period=0", "--force")
	var phase string
	waitUntil(t, 90*time.Second, "the in-cluster client pod to finish", func() bool {
		phase, _, _ = e.cp.kubectl("get", "pod", "incluster", "-o", "jsonpath={.status.phase}")
		return phase == "Succeeded" || phase == "Failed"
	})
	out, _, _ := e.cp.kubectl("logs", "incluster")
	if phase != "Succeeded" || !strings.Contains(out, `"gitVersion"`) {
		t.Fatalf("in-cluster kubectl get --raw /version: %s: %s", phase, out)
	}
	t.Logf("a pod's kubectl reached the API server as https://kubernetes.default.svc: %.80s", strings.Join(strings.Fields(out), " "))
}
