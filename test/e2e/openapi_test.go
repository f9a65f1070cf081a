package e2e

import (
	"os"
	"strings"
	"testing"
)

// TestKubectlOpenAPI runs the kubectl commands that read the server's
// OpenAPI documents: explain (v3 schemas), apply --validate=strict
// (server-side field validation, found in the PATCH operation) and
// client-side apply (strategic merge patch computed from the v3 schemas).
func TestKubectlOpenAPI(t *testing.T) {
	cp := startControlPlane(t, t.TempDir(), freePort(t))

	out := cp.must("explain", "pods.spec.containers")
	for _, want := range []string{"KIND:       Pod", "VERSION:    v1", "FIELD: containers <[]Container>",
		"List of containers belonging to the pod.", "imagePullPolicy\t<string>", "livenessProbe\t<Probe>"} {
		if !strings.Contains(out, want) {
			t.Fatalf("explain pods.spec.containers lacks %q:\n%s", want, out)
		}
	}
	out = cp.must("explain", "deployments", "--api-version=apps/v1")
	for _, want := range []string{"GROUP:      apps", "KIND:       Deployment", "VERSION:    v1",
		"Deployment enables declarative updates for Pods and ReplicaSets.", "spec\t<DeploymentSpec>"} {
		if !strings.Contains(out, want) {
			t.Fatalf("explain deployments lacks %q:\n%s", want, out)
		}
	}
	out = cp.must("explain", "deployments.spec.strategy", "--recursive")
	if !strings.Contains(out, "maxSurge\t<IntOrString>") {
		t.Fatalf("explain --recursive:\n%s", out)
	}

	manifest, err := os.ReadFile("testdata/nginx-deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	unknown := strings.Replace(string(manifest), "  replicas: 3\n", "  replicas: 3\n  replicaz: 3\n", 1)
	_, errOut, err := cp.kubectlStdin(unknown, "apply", "--validate=strict", "-f", "-")
	if err == nil || !strings.Contains(errOut, `strict decoding error: unknown field "spec.replicaz"`) {
		t.Fatalf("apply --validate=strict of an unknown field: %v\n%s", err, errOut)
	}
	if _, _, err := cp.kubectl("get", "deploy", "nginx-deployment"); err == nil {
		t.Fatal("the invalid Deployment was created")
	}

	if out := cp.mustStdin(string(manifest), "apply", "--validate=strict", "-f", "-"); !strings.Contains(out, "deployment.apps/nginx-deployment created") {
		t.Fatalf("apply: %s", out)
	}
	// A second apply patches with strategic merge patch from the schemas:
	// the container list is merged by name, the port kept.
	changed := strings.Replace(string(manifest), "nginx:1.22", "nginx:1.23", 1)
	if out := cp.mustStdin(changed, "apply", "-f", "-"); !strings.Contains(out, "deployment.apps/nginx-deployment configured") {
		t.Fatalf("second apply: %s", out)
	}
	got := cp.must("get", "deploy", "nginx-deployment", "-o", "jsonpath={.spec.template.spec.containers[*].image} {.spec.template.spec.containers[0].ports[0].containerPort}")
	if got != "nginx:1.23 80" {
		t.Fatalf("after apply: %q", got)
	}
	if _, errOut, err := cp.kubectlStdin(unknown, "apply", "--validate=strict", "-f", "-"); err == nil || !strings.Contains(errOut, `unknown field "spec.replicaz"`) {
		t.Fatalf("apply --validate=strict of an unknown field onto an existing object: %v\n%s", err, errOut)
	}

	// Served as kube-apiserver serves them: v2 in JSON, v3 per group-version.
	if out := cp.must("get", "--raw", "/openapi/v2"); !strings.Contains(out, `"io.k8s.api.core.v1.Pod"`) {
		t.Fatal("/openapi/v2 lacks the Pod definition")
	}
	if out := cp.must("get", "--raw", "/openapi/v3"); !strings.Contains(out, `"apis/apps/v1":{"serverRelativeURL":"/openapi/v3/apis/apps/v1?hash=`) {
		t.Fatalf("/openapi/v3: %s", out)
	}
}
