package e2e

import (
	"os"
	"strings"
	"testing"
)

const ssaConfigMap = `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  mode: %s
`

// TestKubectlServerSideApply runs kubectl's server-side apply against the
// control plane: create and update through apply, a second field manager
// conflicting on replicas and forcing it, the managers shown by get,
// kubectl diff (a dry-run patch or apply) and a server dry-run apply
// that stores nothing.
func TestKubectlServerSideApply(t *testing.T) {
	cp := startControlPlane(t, t.TempDir(), freePort(t))
	manifest, err := os.ReadFile("testdata/nginx-deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	configMap := func(mode string) string { return strings.Replace(ssaConfigMap, "%s", mode, 1) }

	if out := cp.mustStdin(string(manifest), "apply", "--server-side", "-f", "-"); !strings.Contains(out, "deployment.apps/nginx-deployment serverside-applied") {
		t.Fatalf("apply --server-side: %s", out)
	}
	if out := cp.mustStdin(configMap("a"), "apply", "--server-side", "-f", "-"); !strings.Contains(out, "configmap/settings serverside-applied") {
		t.Fatalf("apply --server-side of a ConfigMap: %s", out)
	}
	changed := strings.Replace(string(manifest), "nginx:1.22", "nginx:1.23", 1)
	cp.mustStdin(changed, "apply", "--server-side", "-f", "-")
	cp.mustStdin(configMap("b"), "apply", "--server-side", "-f", "-")
	got := cp.must("get", "deploy", "nginx-deployment", "-o", "jsonpath={.spec.template.spec.containers[0].image} {.spec.replicas} {.spec.template.spec.containers[0].ports[0].containerPort}")
	if got != "nginx:1.23 3 80" {
		t.Fatalf("after the second apply: %q", got)
	}
	if got := cp.must("get", "cm", "settings", "-o", "jsonpath={.data.mode}"); got != "b" {
		t.Fatalf("ConfigMap after the second apply: %q", got)
	}

	// Another manager's replicas conflict with kubectl's, until forced.
	replicas := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: nginx-deployment\nspec:\n  replicas: 5\n"
	_, errOut, err := cp.kubectlStdin(replicas, "apply", "--server-side", "--field-manager=other", "-f", "-")
	if err == nil || !strings.Contains(errOut, `conflict with "kubectl": .spec.replicas`) || !strings.Contains(errOut, "--force-conflicts") {
		t.Fatalf("conflicting apply: %v\n%s", err, errOut)
	}
	cp.mustStdin(replicas, "apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", "-")
	if got := cp.must("get", "deploy", "nginx-deployment", "-o", "jsonpath={.spec.replicas} {.spec.template.spec.containers[0].image}"); got != "5 nginx:1.23" {
		t.Fatalf("after the forced apply: %q", got)
	}
	out := cp.must("get", "deploy", "nginx-deployment", "-o", "yaml", "--show-managed-fields")
	for _, want := range []string{"manager: kubectl", "manager: other", "operation: Apply", "f:replicas: {}", "f:image: {}"} {
		if !strings.Contains(out, want) {
			t.Fatalf("get --show-managed-fields lacks %q:\n%s", want, out)
		}
	}
	if out := cp.must("get", "deploy", "nginx-deployment", "-o", "yaml"); strings.Contains(out, "managedFields") {
		t.Fatalf("get -o yaml shows managedFields:\n%s", out)
	}

	// kubectl diff: client-side (a dry-run patch) and server-side (a
	// dry-run apply) show the change and exit 1.
	for _, args := range [][]string{{"diff", "-f", "-"}, {"diff", "--server-side", "-f", "-"}} {
		out, errOut, err := cp.kubectlStdin(configMap("c"), args...)
		if err == nil || !strings.Contains(out, "-  mode: b") || !strings.Contains(out, "+  mode: c") {
			t.Fatalf("kubectl %s: %v\n%s\n%s", strings.Join(args, " "), err, out, errOut)
		}
	}
	if out, errOut, err := cp.kubectlStdin(configMap("b"), "diff", "--server-side", "-f", "-"); err != nil || out != "" {
		t.Fatalf("kubectl diff of the applied configuration: %v\n%s\n%s", err, out, errOut)
	}

	// A server dry-run apply answers but stores nothing.
	out = cp.mustStdin(configMap("d"), "apply", "--server-side", "--dry-run=server", "-f", "-")
	if !strings.Contains(out, "configmap/settings serverside-applied (server dry run)") {
		t.Fatalf("apply --dry-run=server: %s", out)
	}
	fresh := strings.Replace(configMap("x"), "name: settings", "name: fresh", 1)
	cp.mustStdin(fresh, "apply", "--server-side", "--dry-run=server", "-f", "-")
	if got := cp.must("get", "cm", "settings", "-o", "jsonpath={.data.mode}"); got != "b" {
		t.Fatalf("ConfigMap after a dry-run apply: %q", got)
	}
	if _, _, err := cp.kubectl("get", "cm", "fresh"); err == nil {
		t.Fatal("a dry-run apply created a ConfigMap")
	}
}
