package admissionplugins_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/controlplane/controlplanetest"
	"github.com/nodelet/nodelet/test/testkit"
)

// reviewer is a webhook on loopback HTTPS: /mutate labels what it is
// sent, /validate refuses ConfigMaps holding a key named "forbidden".
func reviewer(t *testing.T) *httptest.Server {
	serve := func(decide func(*admissionv1.AdmissionRequest, *admissionv1.AdmissionResponse)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			var review admissionv1.AdmissionReview
			if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
				http.Error(w, "bad review", http.StatusBadRequest)
				return
			}
			resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
			decide(review.Request, resp)
			review.Response, review.Request = resp, nil
			_ = json.NewEncoder(w).Encode(review)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/mutate", serve(func(_ *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse) {
		resp.Patch = []byte(`[{"op":"add","path":"/metadata/labels","value":{"mutated":"yes"}}]`)
		resp.PatchType = ptr.To(admissionv1.PatchTypeJSONPatch)
	}))
	mux.Handle("/validate", serve(func(req *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse) {
		var cm corev1.ConfigMap
		if err := json.Unmarshal(req.Object.Raw, &cm); err == nil && cm.Data["forbidden"] != "" {
			resp.Allowed = false
			resp.Result = &metav1.Status{Code: http.StatusForbidden, Message: "no forbidden keys"}
		}
	}))
	ts := httptest.NewTLSServer(mux)
	t.Cleanup(ts.Close)
	return ts
}

func hookConfig(ts *httptest.Server, path string) admissionregistrationv1.WebhookClientConfig {
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw})
	return admissionregistrationv1.WebhookClientConfig{URL: ptr.To(ts.URL + path), CABundle: ca}
}

var configMapRules = []admissionregistrationv1.RuleWithOperations{{
	Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
	Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
}}

func configMap(name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}
}

// Upstream's webhook plugins call a mutating and a validating webhook
// served on loopback; a webhook that is down fails the request or not as
// its failurePolicy says.
func TestAdmissionWebhooks(t *testing.T) {
	srv := controlplanetest.Start(t, controlplanetest.Options{Admission: controlplanetest.AdmissionWith(
		"NamespaceLifecycle", "MutatingAdmissionWebhook", "ValidatingAdmissionPolicy", "ValidatingAdmissionWebhook")})
	cs := srv.Clientset(t)
	ctx := context.Background()
	ts := reviewer(t)
	reg := cs.AdmissionregistrationV1()
	none := admissionregistrationv1.SideEffectClassNone
	if _, err := reg.MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "label"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "label.example.com", ClientConfig: hookConfig(ts, "/mutate"),
			Rules: configMapRules, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	vwc, err := reg.ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "check"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "check.example.com", ClientConfig: hookConfig(ts, "/validate"),
			Rules: configMapRules, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The plugins read configurations through informers.
	testkit.Eventually(t, 10*time.Second, "the webhook configurations in the plugins' informers", func() bool {
		_, err := cs.CoreV1().ConfigMaps("default").Create(ctx, configMap("probe", map[string]string{"forbidden": "x"}),
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil
	})
	got, err := cs.CoreV1().ConfigMaps("default").Create(ctx, configMap("a", nil), metav1.CreateOptions{})
	if err != nil || got.Labels["mutated"] != "yes" {
		t.Fatalf("mutated create: %v, labels %v", err, got.Labels)
	}
	_, err = cs.CoreV1().ConfigMaps("default").Create(ctx, configMap("b", map[string]string{"forbidden": "x"}), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `admission webhook "check.example.com" denied the request: no forbidden keys`) {
		t.Fatalf("validating webhook: %v, want 403 with its message", err)
	}
	// Other kinds are not sent.
	if _, err := cs.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("secret: %v", err)
	}

	ts.Close()
	removeMutating(t, cs)
	testkit.Eventually(t, 10*time.Second, "the webhook call failing", func() bool {
		_, err = cs.CoreV1().ConfigMaps("default").Create(ctx, configMap("c", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), `failed calling webhook "check.example.com"`)
	})
	if !apierrors.IsInternalError(err) {
		t.Errorf("webhook down, failurePolicy Fail: %v, want 500", err)
	}
	vwc.Webhooks[0].FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
	if _, err := reg.ValidatingWebhookConfigurations().Update(ctx, vwc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "creates admitted again", func() bool {
		_, err = cs.CoreV1().ConfigMaps("default").Create(ctx, configMap("c", nil), metav1.CreateOptions{})
		return err == nil
	})
}

func removeMutating(t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	if err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), "label", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Upstream's ValidatingAdmissionPolicy plugin refuses what the policy's
// CEL expression forbids, where its binding applies.
func TestValidatingAdmissionPolicy(t *testing.T) {
	srv := controlplanetest.Start(t, controlplanetest.Options{Admission: controlplanetest.AdmissionWith(
		"NamespaceLifecycle", "ValidatingAdmissionPolicy")})
	cs := srv.Clientset(t)
	ctx := context.Background()
	reg := cs.AdmissionregistrationV1()
	if _, err := reg.ValidatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "small"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: configMapRules[0]}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "size(object.data) < 3", Message: "too many keys"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "small-binding"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "small",
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	three := map[string]string{"a": "1", "b": "2", "c": "3"}
	var err error
	testkit.Eventually(t, 10*time.Second, "the policy in force", func() bool {
		_, err = cs.CoreV1().ConfigMaps("default").Create(ctx, configMap("big", three), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil
	})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy 'small' with binding 'small-binding' denied request: too many keys") {
		t.Fatalf("policy: %v, want 422 with its message", err)
	}
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, configMap("ok", map[string]string{"a": "1"}), metav1.CreateOptions{}); err != nil {
		t.Fatalf("allowed by the policy: %v", err)
	}

	// pods/binding is admitted too: a policy may keep pods off a node.
	if _, err := reg.ValidatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "not-there"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/binding"}},
				}}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "object.target.name != 'tainted'", Message: "not on tainted"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "not-there"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "not-there",
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod("p", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bind := func(node string, dryRun ...string) error {
		return cs.CoreV1().Pods("default").Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p"},
			Target: corev1.ObjectReference{Kind: "Node", Name: node}}, metav1.CreateOptions{DryRun: dryRun})
	}
	testkit.Eventually(t, 10*time.Second, "the binding policy in force", func() bool { return bind("tainted", metav1.DryRunAll) != nil })
	err = bind("tainted")
	if err == nil || !strings.Contains(err.Error(), "denied request: not on tainted") {
		t.Fatalf("binding to tainted: %v, want the policy's refusal", err)
	}
	if err := bind("fine"); err != nil {
		t.Fatalf("binding to another node: %v", err)
	}
}
