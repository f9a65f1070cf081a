package e2e

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/hosttools"
)

// TestKubectlWorkflow walks a user's day with the real kubectl against
// the real controlplane binary.
func TestKubectlWorkflow(t *testing.T) {
	cp := startControlPlane(t, t.TempDir(), freePort(t))

	out := cp.must("version", "-o", "json")
	if !strings.Contains(out, `"serverVersion"`) || !strings.Contains(out, `"minor": "37"`) || !strings.Contains(out, `"gitVersion": "v1.37.2+nodelet"`) {
		t.Fatalf("kubectl version: %s", out)
	}
	out = cp.must("api-resources")
	for _, want := range []string{"deployments", "deploy", "apps/v1", "pods", "po", "namespaces", "ns", "leases", "endpointslices", "replicasets", "rs"} {
		if !strings.Contains(out, want) {
			t.Fatalf("api-resources lacks %q:\n%s", want, out)
		}
	}
	out = cp.must("get", "namespaces")
	for _, ns := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		if !strings.Contains(out, ns) {
			t.Fatalf("namespace %s missing:\n%s", ns, out)
		}
	}

	out = cp.must("apply", "-f", "testdata/nginx-deployment.yaml")
	if !strings.Contains(out, "deployment.apps/nginx-deployment created") {
		t.Fatalf("apply: %s", out)
	}
	out = cp.must("apply", "-f", "testdata/nginx-deployment.yaml")
	if !strings.Contains(out, "unchanged") {
		t.Fatalf("second apply should be unchanged: %s", out)
	}
	out = cp.must("get", "deploy")
	if !strings.Contains(out, "NAME") || !strings.Contains(out, "READY") || !strings.Contains(out, "nginx-deployment") || !strings.Contains(out, "0/3") {
		t.Fatalf("get deploy:\n%s", out)
	}
	out = cp.must("get", "deploy", "-o", "wide")
	if !strings.Contains(out, "nginx:1.22") || !strings.Contains(out, "app=nginx") {
		t.Fatalf("get deploy -o wide:\n%s", out)
	}
	out = cp.must("get", "deploy", "nginx-deployment", "-o", "jsonpath={.spec.strategy.rollingUpdate.maxSurge} {.spec.revisionHistoryLimit} {.spec.progressDeadlineSeconds} {.metadata.generation} {.spec.template.spec.containers[0].imagePullPolicy}")
	if out != "25% 10 600 1 IfNotPresent" {
		t.Fatalf("defaults: %q", out)
	}

	// apply with a changed image bumps the generation; a label does not.
	manifest, _ := os.ReadFile("testdata/nginx-deployment.yaml")
	changed := strings.Replace(string(manifest), "nginx:1.22", "nginx:1.23", 1)
	cp.mustStdin(changed, "apply", "-f", "-")
	cp.must("label", "deploy", "nginx-deployment", "tier=web")
	cp.must("annotate", "deploy", "nginx-deployment", "owner=team-a")
	out = cp.must("get", "deploy", "nginx-deployment", "-o", "jsonpath={.metadata.generation} {.metadata.labels.tier} {.metadata.annotations.owner} {.spec.template.spec.containers[0].image}")
	if out != "2 web team-a nginx:1.23" {
		t.Fatalf("after apply/label/annotate: %q", out)
	}

	cp.must("scale", "deploy", "nginx-deployment", "--replicas=5")
	if out = cp.must("get", "deploy", "nginx-deployment", "-o", "jsonpath={.spec.replicas}"); out != "5" {
		t.Fatalf("replicas after scale: %q", out)
	}

	// kubectl edit through an EDITOR that rewrites the replica count.
	editor := filepath.Join(t.TempDir(), "editor.sh")
	os.WriteFile(editor, []byte("#!/bin/sh\nsed -i 's/replicas: 5/replicas: 2/' \"$1\"\n"), 0o755)
	cmd := hosttools.Command("kubectl", "--kubeconfig", cp.kubeconfig, "edit", "deploy", "nginx-deployment")
	cmd.Env = append(os.Environ(), "EDITOR="+editor, "KUBE_EDITOR="+editor)
	if b, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(b), "edited") {
		t.Fatalf("kubectl edit: %v\n%s", err, b)
	}
	if out = cp.must("get", "deploy", "nginx-deployment", "-o", "jsonpath={.spec.replicas}"); out != "2" {
		t.Fatalf("replicas after edit: %q", out)
	}
	cp.must("rollout", "restart", "deploy", "nginx-deployment")
	if out = cp.must("get", "deploy", "nginx-deployment", "-o", "jsonpath={.spec.template.metadata.annotations}"); !strings.Contains(out, "kubectl.kubernetes.io/restartedAt") {
		t.Fatalf("rollout restart did not annotate the template: %q", out)
	}

	out = cp.must("describe", "deploy", "nginx-deployment")
	for _, want := range []string{"Name:", "nginx-deployment", "Replicas:", "StrategyType:", "RollingUpdate", "nginx:1.23"} {
		if !strings.Contains(out, want) {
			t.Fatalf("describe lacks %q:\n%s", want, out)
		}
	}

	testGetWatch(t, cp)

	out = cp.must("delete", "deploy", "nginx-deployment")
	if !strings.Contains(out, `deployment.apps "nginx-deployment" deleted`) {
		t.Fatalf("delete: %s", out)
	}
	if _, errOut, err := cp.kubectl("get", "deploy", "nginx-deployment"); err == nil || !strings.Contains(errOut, "NotFound") && !strings.Contains(errOut, "not found") {
		t.Fatalf("deployment still there after delete: %v %s", err, errOut)
	}

}

// testGetWatch runs `kubectl get -w` and checks that it prints objects
// created after it started.
func testGetWatch(t *testing.T, cp *controlPlane) {
	cmd := hosttools.Command("kubectl", "--kubeconfig", cp.kubeconfig, "get", "configmaps", "-w", "--request-timeout=0")
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatalf("kubectl get -w: %v", err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	time.Sleep(500 * time.Millisecond)
	cp.must("create", "configmap", "watched", "--from-literal=a=b")
	deadline := time.After(15 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("kubectl get -w ended early")
			}
			if strings.HasPrefix(l, "watched") {
				return
			}
		case <-deadline:
			t.Fatalf("kubectl get -w never showed the new configmap")
		}
	}
}

func (cp *controlPlane) mustStdin(stdin string, args ...string) string {
	cp.t.Helper()
	out, errOut, err := cp.kubectlStdin(stdin, args...)
	if err != nil {
		cp.t.Fatalf("kubectl %s: %v\n%s\n%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// TestKubectlRejectsBadInput checks that wrong input gets a clear error
// and changes nothing.
func TestKubectlRejectsBadInput(t *testing.T) {
	cp := startControlPlane(t, t.TempDir(), freePort(t))
	cases := []struct {
		name, manifest, want string
	}{
		{"unknown field", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\nbogus: 1\n", `unknown field "bogus"`},
		{"invalid name", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Not_Valid\n", "Invalid value"},
		{"selector mismatch", `apiVersion: apps/v1
kind: Deployment
metadata: {name: d}
spec:
  selector: {matchLabels: {app: foo}}
  template:
    metadata: {labels: {app: bar}}
    spec: {containers: [{name: c, image: busybox}]}
`, "does not match template"},
		{"no containers", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: []}\n", "Required value"},
		{"bad quantity", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i, resources: {limits: {cpu: lots}}}]}\n", "quantities must match"},
		{"missing namespace", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: nope}\n", `namespaces "nope" not found`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, errOut, err := cp.kubectlStdin(c.manifest, "apply", "-f", "-")
			if err == nil || !strings.Contains(errOut, c.want) {
				t.Fatalf("want an error containing %q, got err=%v stderr=%s", c.want, err, errOut)
			}
		})
	}
	out := cp.must("get", "pods,configmaps,deployments", "-A", "-o", "name")
	if strings.Contains(out, "pod/") || strings.Contains(out, "deployment") || strings.Contains(out, "configmap/a") {
		t.Fatalf("rejected objects were stored:\n%s", out)
	}
}
