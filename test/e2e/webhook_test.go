package e2e

import (
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/nodelet/nodelet/test/testkit"
)

// mutatingWebhook is a user's mutating admission webhook: it labels the
// ConfigMaps it is sent (mutated-by=e2e-webhook) with a JSON patch and
// counts the dry-run requests among them.
type mutatingWebhook struct {
	calls, dryRuns atomic.Int64
}

func (m *mutatingWebhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var review admissionv1.AdmissionReview
	if err != nil || json.Unmarshal(body, &review) != nil || review.Request == nil {
		http.Error(w, "bad AdmissionReview", http.StatusBadRequest)
		return
	}
	m.calls.Add(1)
	if review.Request.DryRun != nil && *review.Request.DryRun {
		m.dryRuns.Add(1)
	}
	patch := `[{"op":"add","path":"/metadata/labels/mutated-by","value":"e2e-webhook"}]`
	pt := admissionv1.PatchTypeJSONPatch
	review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true,
		Patch: []byte(patch), PatchType: &pt}
	review.Request = nil
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(&review)
}

// TestMutatingWebhook: a MutatingWebhookConfiguration applied with
// kubectl sends matching creates (by object selector) to the user's
// webhook over HTTPS (its caBundle verifies it); its patch lands in the
// stored object, a server-side dry run reaches it marked dryRun, objects
// it does not select are untouched, and deleting the configuration stops
// the calls.
func TestMutatingWebhook(t *testing.T) {
	hook := &mutatingWebhook{}
	srv := httptest.NewTLSServer(hook)
	defer srv.Close()
	caBundle := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))

	cp := startControlPlane(t, t.TempDir(), freePort(t))
	config := fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: e2e-labeller}
webhooks:
- name: labeller.e2e.nodelet.dev
  clientConfig: {url: "%s/mutate", caBundle: %s}
  rules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
  objectSelector: {matchLabels: {webhook: "yes"}}
  failurePolicy: Fail
  sideEffects: None
  admissionReviewVersions: [v1]
  timeoutSeconds: 5
`, srv.URL, caBundle)
	if out, errOut, err := cp.kubectlStdin(config, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply: %v\n%s%s", err, out, errOut)
	}
	label := func(name string) string {
		out, _, _ := cp.kubectl("get", "configmap", name, "-o", "jsonpath={.metadata.labels.mutated-by}")
		return out
	}
	// The plugin sees the configuration through its informer.
	n := 0
	testkit.Eventually(t, 30*time.Second, "a selected ConfigMap mutated", func() bool {
		n++
		cmd := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: sel-%d, labels: {webhook: \"yes\"}}\n", n)
		if out, errOut, err := cp.kubectlStdin(cmd, "create", "-f", "-"); err != nil {
			t.Fatalf("create: %v\n%s%s", err, out, errOut)
		}
		return label(fmt.Sprintf("sel-%d", n)) == "e2e-webhook"
	})
	cp.must("create", "configmap", "unselected")
	if got := label("unselected"); got != "" {
		t.Fatalf("a ConfigMap the webhook does not select was labelled %q", got)
	}

	dry := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: dry, labels: {webhook: \"yes\"}}\n"
	out, errOut, err := cp.kubectlStdin(dry, "create", "--dry-run=server", "-o", "jsonpath={.metadata.labels.mutated-by}", "-f", "-")
	if err != nil || out != "e2e-webhook" || hook.dryRuns.Load() == 0 {
		t.Fatalf("server-side dry run: %q %v %s (dry runs seen %d)", out, err, errOut, hook.dryRuns.Load())
	}
	if _, _, err := cp.kubectl("get", "configmap", "dry"); err == nil {
		t.Fatal("the dry-run ConfigMap was stored")
	}

	cp.must("delete", "mutatingwebhookconfiguration", "e2e-labeller")
	testkit.Eventually(t, 30*time.Second, "calls stop after the configuration is deleted", func() bool {
		n++
		before := hook.calls.Load()
		cmd := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: after-%d, labels: {webhook: \"yes\"}}\n", n)
		if out, errOut, err := cp.kubectlStdin(cmd, "create", "-f", "-"); err != nil {
			t.Fatalf("create: %v\n%s%s", err, out, errOut)
		}
		return hook.calls.Load() == before && !strings.Contains(label(fmt.Sprintf("after-%d", n)), "e2e")
	})
}
