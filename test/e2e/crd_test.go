package e2e

import (
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// TestCustomResourceDefinitions runs a CRD's life through the real
// kubectl: a structural schema with defaults, an enum, a pattern, a CEL
// rule, printer columns, a short name and the status subresource;
// Established; custom resources created, listed (printer columns) and
// refused with upstream's messages; defaults applied and unknown fields
// pruned; status written only through /status; kubectl explain and
// server-side apply; a restart keeps the CRD and its instances; deleting
// the CRD deletes its instances and stops serving it. Also the scale
// subresource and defaults applied on read.
func TestCustomResourceDefinitions(t *testing.T) {
	dir, port := t.TempDir(), freePort(t)
	cp := startControlPlane(t, dir, port)
	crd, err := os.ReadFile("testdata/widget-crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cp.mustStdin(string(crd), "apply", "-f", "-")
	cp.must("wait", "--for=condition=Established", "crd/widgets.example.com", "--timeout=30s")
	if out := cp.must("get", "crd"); !strings.Contains(out, "widgets.example.com") || !strings.Contains(out, "CREATED AT") {
		t.Fatalf("kubectl get crd:\n%s", out)
	}

	w1 := "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w1\nspec:\n  size: 3\n  code: abc\n"
	cp.mustStdin(w1, "apply", "-f", "-")
	out := cp.must("get", "wd")
	if !strings.Contains(out, "SIZE") || !strings.Contains(out, "COLOR") || !regexp.MustCompile(`(?m)^w1\s+3\s+green\s+`).MatchString(out) {
		t.Fatalf("kubectl get wd (printer columns, default color):\n%s", out)
	}
	if got := cp.must("get", "widget", "w1", "-o", "jsonpath={.spec.maxSize} {.metadata.generation}"); got != "10 1" {
		t.Fatalf("defaults and generation: %q", got)
	}

	// Refused with upstream's validation messages.
	bad := "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: bad\nspec:\n  color: purple\n  code: ABC\n"
	_, errOut, err := cp.kubectlStdin(bad, "create", "-f", "-")
	for _, want := range []string{`The Widget "bad" is invalid`, `spec.color: Unsupported value: "purple": supported values: "red", "green", "blue"`,
		`spec.code: Invalid value: "ABC": spec.code in body should match '^[a-z]+$'`} {
		if err == nil || !strings.Contains(errOut, want) {
			t.Fatalf("invalid widget: %v, want %q in:\n%s", err, want, errOut)
		}
	}
	tooBig := "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: big\nspec:\n  size: 30\n"
	if _, errOut, err := cp.kubectlStdin(tooBig, "create", "-f", "-"); err == nil || !strings.Contains(errOut, "size must not exceed maxSize") {
		t.Fatalf("the CEL rule: %v\n%s", err, errOut)
	}

	// Unknown fields: refused by kubectl's strict validation, pruned
	// without it; status is not taken from a create or an update.
	w2 := "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w2\nspec:\n  size: 2\n  bogus: 1\nstatus:\n  phase: Made\n"
	if _, errOut, err := cp.kubectlStdin(w2, "create", "-f", "-"); err == nil || !strings.Contains(errOut, `unknown field "spec.bogus"`) {
		t.Fatalf("strict create with an unknown field: %v\n%s", err, errOut)
	}
	cp.mustStdin(w2, "create", "--validate=false", "-f", "-")
	if got := cp.must("get", "widget", "w2", "-o", "jsonpath={.spec.bogus}|{.status.phase}"); got != "|" {
		t.Fatalf("unknown field or status kept: %q", got)
	}
	cp.must("patch", "widget", "w2", "--type=merge", "-p", `{"status":{"phase":"Main"}}`)
	cp.must("patch", "widget", "w2", "--subresource=status", "--type=merge", "-p", `{"status":{"phase":"Running"},"spec":{"size":9}}`)
	if got := cp.must("get", "widget", "w2", "-o", "jsonpath={.status.phase} {.spec.size}"); got != "Running 2" {
		t.Fatalf("status through /status only: %q", got)
	}

	// Custom resources have no protobuf: a protobuf-only client gets 406,
	// kubectl's protobuf-then-JSON gets JSON; a strategic merge patch 415.
	client, err := rest.HTTPClientFor(cp.restConfig())
	if err != nil {
		t.Fatal(err)
	}
	w1URL := cp.restConfig().Host + "/apis/example.com/v1/namespaces/default/widgets/w1"
	for _, c := range []struct {
		method, accept, contentType, body string
		code                              int
	}{
		{"GET", "application/vnd.kubernetes.protobuf", "", "", 406},
		{"GET", "application/vnd.kubernetes.protobuf,application/json", "", "", 200},
		{"PATCH", "", "application/strategic-merge-patch+json", `{"spec":{"size":4}}`, 415},
	} {
		req, _ := http.NewRequest(c.method, w1URL, strings.NewReader(c.body))
		if c.accept != "" {
			req.Header.Set("Accept", c.accept)
		}
		if c.contentType != "" {
			req.Header.Set("Content-Type", c.contentType)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.code || (c.code == 200 && !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json")) {
			t.Fatalf("%s %s (Accept %q, Content-Type %q): %d %s, want %d", c.method, w1URL, c.accept, c.contentType, resp.StatusCode, resp.Header.Get("Content-Type"), c.code)
		}
	}

	// The scale subresource writes the CRD's spec replicas path.
	cp.must("scale", "widget", "w1", "--replicas=3")
	if got := cp.must("get", "--raw", "/apis/example.com/v1/namespaces/default/widgets/w1/scale"); !strings.Contains(got, `"spec":{"replicas":3}`) {
		t.Fatalf("widgets/scale after kubectl scale: %s", got)
	}
	if got := cp.must("get", "widget", "w1", "-o", "jsonpath={.spec.replicas} {.metadata.generation}"); got != "3 2" {
		t.Fatalf("replicas and generation after kubectl scale: %q", got)
	}

	// A default added to the schema later shows on objects stored before.
	cp.must("patch", "crd", "widgets.example.com", "--type=json", "-p",
		`[{"op":"add","path":"/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/note","value":{"type":"string","default":"hello"}}]`)
	deadline := time.Now().Add(10 * time.Second)
	for cp.must("get", "widget", "w1", "-o", "jsonpath={.spec.note}") != "hello" {
		if time.Now().After(deadline) {
			t.Fatalf("the new default is not applied on read")
		}
		time.Sleep(100 * time.Millisecond)
	}

	// kubectl explain reads the CRD's OpenAPI; server-side apply its types.
	if out := cp.must("explain", "widgets.spec"); !strings.Contains(out, "color") || !strings.Contains(out, "enum: red, green, blue") {
		t.Fatalf("kubectl explain:\n%s", out)
	}
	w3 := "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w3\nspec:\n  size: 4\n  color: red\n"
	cp.mustStdin(w3, "apply", "--server-side", "-f", "-")
	cp.mustStdin(strings.Replace(w3, "size: 4", "size: 5", 1), "apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", "-")
	out = cp.must("get", "widget", "w3", "-o", "yaml", "--show-managed-fields")
	for _, want := range []string{"manager: kubectl", "manager: other", "f:size: {}", "size: 5"} {
		if !strings.Contains(out, want) {
			t.Fatalf("server-side apply: no %q in\n%s", want, out)
		}
	}

	// Admission sees custom resources as they are (no internal type): a
	// ValidatingAdmissionPolicy on widgets denies with upstream's message.
	cp.mustStdin(smallWidgetsPolicy, "apply", "-f", "-")
	big := "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: big\nspec:\n  size: 7\n"
	deadline = time.Now().Add(20 * time.Second)
	for {
		_, errOut, err := cp.kubectlStdin(big, "create", "-f", "-")
		if err != nil && strings.Contains(errOut, "ValidatingAdmissionPolicy 'small-widgets' with binding 'small-widgets' denied request: widgets must be small") {
			break
		}
		if err == nil {
			cp.must("delete", "widget", "big")
		}
		if time.Now().After(deadline) {
			t.Fatalf("the policy does not deny a big widget: %v %s", err, errOut)
		}
		time.Sleep(200 * time.Millisecond)
	}
	cp.must("delete", "validatingadmissionpolicybinding", "small-widgets")

	// A restart serves the CRD and its instances from its first ready moment.
	cp.stop()
	cp = startControlPlane(t, dir, port)
	if out := cp.must("get", "widgets", "-o", "name"); out != "widget.example.com/w1\nwidget.example.com/w2\nwidget.example.com/w3\n" {
		t.Fatalf("after a restart: %q", out)
	}

	// Deleting the CRD deletes its instances, then it is no longer served.
	cp.must("delete", "crd", "widgets.example.com", "--timeout=60s")
	deadline = time.Now().Add(30 * time.Second)
	for {
		out, errOut, err := cp.kubectl("get", "--raw", "/apis/example.com/v1/namespaces/default/widgets")
		if err != nil && strings.Contains(errOut, "NotFound") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("widgets still served after the CRD's deletion: %s %s", out, errOut)
		}
		time.Sleep(200 * time.Millisecond)
	}
	cp.mustStdin(string(crd), "apply", "-f", "-")
	cp.must("wait", "--for=condition=Established", "crd/widgets.example.com", "--timeout=30s")
	if out, errOut, err := cp.kubectl("get", "widgets", "-o", "name"); err != nil || out != "" {
		t.Fatalf("instances outlived their CRD: %v %q %s", err, out, errOut)
	}
}

const smallWidgetsPolicy = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: small-widgets}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: ["example.com"], apiVersions: ["v1"], operations: ["CREATE", "UPDATE"], resources: ["widgets"]}
  validations:
  - {expression: "object.spec.size < 5", message: "widgets must be small"}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: small-widgets}
spec: {policyName: small-widgets, validationActions: [Deny]}
`
