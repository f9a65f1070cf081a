package apiserver

import (
	"reflect"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/controlplane/storage"
)

func testWebhook(name string) admissionregistrationv1.ValidatingWebhook {
	return admissionregistrationv1.ValidatingWebhook{
		Name: name,
		ClientConfig: admissionregistrationv1.WebhookClientConfig{
			Service: &admissionregistrationv1.ServiceReference{Namespace: "default", Name: "hook"},
		},
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
		}},
		SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
		AdmissionReviewVersions: []string{"v1"},
	}
}

func testPolicy(name, expression string) *admissionregistrationv1.ValidatingAdmissionPolicy {
	return &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: testWebhook("").Rules[0]}},
			},
			Validations: []admissionregistrationv1.Validation{{Expression: expression}},
		},
	}
}

// Webhook configurations as upstream serves them: defaulted by the v1
// defaulters, a generation bumped by webhook changes only, validated
// with upstream's messages, warned about rules webhooks never see.
func TestWebhookConfigurations(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	ctx := testCtx(t)
	seen := &warningsSeen{}
	cfg := rest.CopyConfig(env.config)
	cfg.WarningHandler = seen
	hooks := newClientset(t, cfg).AdmissionregistrationV1().ValidatingWebhookConfigurations()

	created, err := hooks.Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-policy"},
		Webhooks:   []admissionregistrationv1.ValidatingWebhook{testWebhook("pods.example.com")},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	hook := created.Webhooks[0]
	if created.Generation != 1 || *hook.FailurePolicy != admissionregistrationv1.Fail || *hook.TimeoutSeconds != 10 ||
		*hook.MatchPolicy != admissionregistrationv1.Equivalent || *hook.Rules[0].Scope != admissionregistrationv1.AllScopes ||
		*hook.ClientConfig.Service.Port != 443 {
		t.Errorf("created: generation %d, webhook %+v", created.Generation, hook)
	}
	if got := seen.take(); len(got) > 0 {
		t.Errorf("warnings for a pods webhook: %q", got)
	}

	labeled := created.DeepCopy()
	labeled.Labels = map[string]string{"team": "a"}
	labeled, err = hooks.Update(ctx, labeled, metav1.UpdateOptions{})
	if err != nil || labeled.Generation != 1 {
		t.Fatalf("label update: generation %d, %v; want 1", labeled.Generation, err)
	}
	changed := labeled.DeepCopy()
	changed.Webhooks[0].TimeoutSeconds = ptr.To[int32](5)
	changed.Webhooks[0].Rules[0].APIGroups = []string{"authorization.k8s.io"}
	changed.Webhooks[0].Rules[0].Resources = []string{"subjectaccessreviews"}
	changed, err = hooks.Update(ctx, changed, metav1.UpdateOptions{})
	if err != nil || changed.Generation != 2 || *changed.Webhooks[0].TimeoutSeconds != 5 {
		t.Fatalf("webhook update: %+v, %v; want generation 2", changed, err)
	}
	want := []string{"webhooks[0].rules[0]: subjectaccessreviews.authorization.k8s.io is excluded from admission webhooks; this rule will have no effect"}
	if got := seen.take(); !reflect.DeepEqual(got, want) {
		t.Errorf("warnings %q, want %q", got, want)
	}
	if got, err := hooks.Get(ctx, "pod-policy", metav1.GetOptions{}); err != nil || got.Generation != 2 {
		t.Errorf("get: %v %v", got, err)
	}
	if list, err := hooks.List(ctx, metav1.ListOptions{}); err != nil || len(list.Items) != 1 {
		t.Errorf("list: %v %v", list, err)
	}

	noSideEffects := testWebhook("pods.example.com")
	noSideEffects.SideEffects = nil
	_, err = hooks.Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Webhooks: []admissionregistrationv1.ValidatingWebhook{noSideEffects},
	}, metav1.CreateOptions{})
	wantInvalid(t, "no sideEffects", err,
		`ValidatingWebhookConfiguration.admissionregistration.k8s.io "bad" is invalid: webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun`)

	v := testWebhook("pods.example.com")
	mutating := newClientset(t, cfg).AdmissionregistrationV1().MutatingWebhookConfigurations()
	m, err := mutating.Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "defaults"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: v.Name, ClientConfig: v.ClientConfig, Rules: v.Rules,
			SideEffects: v.SideEffects, AdmissionReviewVersions: v.AdmissionReviewVersions}},
	}, metav1.CreateOptions{})
	if err != nil || m.Generation != 1 || *m.Webhooks[0].ReinvocationPolicy != admissionregistrationv1.NeverReinvocationPolicy ||
		*m.Webhooks[0].FailurePolicy != admissionregistrationv1.Fail {
		t.Fatalf("create mutating: %+v, %v", m, err)
	}
	m.Webhooks[0].TimeoutSeconds = ptr.To[int32](31)
	_, err = mutating.Update(ctx, m, metav1.UpdateOptions{})
	wantInvalid(t, "timeout above 30", err,
		`MutatingWebhookConfiguration.admissionregistration.k8s.io "defaults" is invalid: webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds`)
}

// ValidatingAdmissionPolicies and their bindings: the policy's status is
// reset on create and kept on updates, its spec kept on status updates;
// the generation follows the spec; CEL expressions are compiled by
// upstream's validation.
func TestValidatingAdmissionPolicies(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	ctx := testCtx(t)
	cs := env.clientset(t)
	policies := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies()

	p := testPolicy("few-containers", "object.spec.containers.size() < 5")
	p.Status.ObservedGeneration = 7
	created, err := policies.Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if created.Generation != 1 || created.Status.ObservedGeneration != 0 || *created.Spec.FailurePolicy != admissionregistrationv1.Fail ||
		*created.Spec.MatchConstraints.MatchPolicy != admissionregistrationv1.Equivalent {
		t.Errorf("created: generation %d, status %+v, spec %+v", created.Generation, created.Status, created.Spec)
	}

	st := created.DeepCopy()
	st.Spec.Validations[0].Expression = "true"
	st.Status.ObservedGeneration = 1
	st.Status.TypeChecking = &admissionregistrationv1.TypeChecking{}
	afterStatus, err := policies.UpdateStatus(ctx, st, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status: %v", err)
	}
	if !reflect.DeepEqual(afterStatus.Spec, created.Spec) || afterStatus.Status.ObservedGeneration != 1 || afterStatus.Generation != 1 {
		t.Errorf("status update: spec %+v, status %+v, generation %d", afterStatus.Spec, afterStatus.Status, afterStatus.Generation)
	}

	labeled := afterStatus.DeepCopy()
	labeled.Labels = map[string]string{"team": "a"}
	labeled.Status = admissionregistrationv1.ValidatingAdmissionPolicyStatus{}
	labeled, err = policies.Update(ctx, labeled, metav1.UpdateOptions{})
	if err != nil || labeled.Generation != 1 || labeled.Status.ObservedGeneration != 1 {
		t.Fatalf("label update: %+v, %v; want generation 1 and the status kept", labeled, err)
	}
	upd := labeled.DeepCopy()
	upd.Spec.Validations[0].Message = "at most four containers"
	upd, err = policies.Update(ctx, upd, metav1.UpdateOptions{})
	if err != nil || upd.Generation != 2 {
		t.Fatalf("spec update: %+v, %v; want generation 2", upd, err)
	}

	_, err = policies.Create(ctx, testPolicy("bad", "object.spec.replicas >"), metav1.CreateOptions{})
	wantInvalid(t, "invalid CEL", err, `ValidatingAdmissionPolicy.admissionregistration.k8s.io "bad" is invalid: `+
		`spec.validations[0].expression: Invalid value: "object.spec.replicas >": compilation failed: `+
		`ERROR: <input>:1:23: Syntax error: mismatched input '<EOF>' expecting `+
		`{'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}`+
		"\n | object.spec.replicas >\n | ......................^")
	_, err = policies.Create(ctx, testPolicy("not-bool", "'text'"), metav1.CreateOptions{})
	wantInvalid(t, "not a boolean", err, `ValidatingAdmissionPolicy.admissionregistration.k8s.io "not-bool" is invalid: `+
		`spec.validations[0].expression: Invalid value: "'text'": must evaluate to bool but got string`)

	bindings := cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "few-containers"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "few-containers",
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}
	cb, err := bindings.Create(ctx, b, metav1.CreateOptions{})
	if err != nil || cb.Generation != 1 {
		t.Fatalf("create binding: %+v, %v", cb, err)
	}
	cb.Spec.ValidationActions = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Warn, admissionregistrationv1.Audit}
	if cb, err = bindings.Update(ctx, cb, metav1.UpdateOptions{}); err != nil || cb.Generation != 2 {
		t.Fatalf("update binding: %+v, %v", cb, err)
	}
	bad := b.DeepCopy()
	bad.Name = "no-actions"
	bad.Spec.ValidationActions = nil
	_, err = bindings.Create(ctx, bad, metav1.CreateOptions{})
	// Upstream's declarative validation (beta, enforced) reports this as a
	// bare "Required value"; the handwritten detail follows it here.
	wantStatus(t, "binding without actions", err, 422)
	if !strings.Contains(err.Error(), `"no-actions" is invalid: spec.validationActions: Required value`) {
		t.Errorf("binding without actions: %v", err)
	}
}

// The four kinds' tables are upstream's printers'.
func TestAdmissionRegistrationTables(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	ctx := testCtx(t)
	ar := env.clientset(t).AdmissionregistrationV1()
	v := testWebhook("a.example.com")
	if _, err := ar.ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "two"},
		Webhooks:   []admissionregistrationv1.ValidatingWebhook{v, testWebhook("b.example.com")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ar.MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "one"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: v.Name, ClientConfig: v.ClientConfig, Rules: v.Rules,
			SideEffects: v.SideEffects, AdmissionReviewVersions: v.AdmissionReviewVersions}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := testPolicy("params", "object.metadata.name != params.data.name")
	p.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
	if _, err := ar.ValidatingAdmissionPolicies().Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ar.ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "params"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "params",
			ParamRef: &admissionregistrationv1.ParamRef{Name: "limits", Namespace: "default",
				ParameterNotFoundAction: ptr.To(admissionregistrationv1.DenyAction)},
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		resource string
		columns  []string
		cells    []interface{}
	}{
		{"validatingwebhookconfigurations", []string{"Name", "Webhooks", "Age"}, []interface{}{"two", float64(2)}},
		{"mutatingwebhookconfigurations", []string{"Name", "Webhooks", "Age"}, []interface{}{"one", float64(1)}},
		{"validatingadmissionpolicies", []string{"Name", "Validations", "ParamKind", "Age"}, []interface{}{"params", float64(1), "v1/ConfigMap"}},
		{"validatingadmissionpolicybindings", []string{"Name", "PolicyName", "ParamRef", "Age"}, []interface{}{"params", "params", "default/limits"}},
	} {
		table := getTable(t, env, "/apis/admissionregistration.k8s.io/v1/"+tt.resource)
		if got := columnNames(table); !reflect.DeepEqual(got, tt.columns) {
			t.Errorf("%s columns %v, want %v", tt.resource, got, tt.columns)
		}
		if len(table.Rows) != 1 || !reflect.DeepEqual(table.Rows[0].Cells[:len(tt.cells)], tt.cells) {
			t.Errorf("%s rows %+v, want cells %v", tt.resource, table.Rows, tt.cells)
		}
	}
}

// Discovery lists the group, preferring v1, with the four resources, the
// policies' status, and upstream's category.
func TestAdmissionRegistrationDiscovery(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	disc := env.clientset(t).Discovery()
	groups, err := disc.ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, g := range groups.Groups {
		if g.Name == "admissionregistration.k8s.io" {
			found = g.PreferredVersion.GroupVersion == "admissionregistration.k8s.io/v1"
		}
	}
	if !found {
		t.Errorf("admissionregistration.k8s.io/v1 not in the groups: %+v", groups.Groups)
	}
	list, err := disc.ServerResourcesForGroupVersion("admissionregistration.k8s.io/v1")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range list.APIResources {
		names = append(names, r.Name)
		if r.Namespaced || (!reflect.DeepEqual(r.Categories, []string{"api-extensions"}) && r.Name != "validatingadmissionpolicies/status") {
			t.Errorf("%s: namespaced %v, categories %v", r.Name, r.Namespaced, r.Categories)
		}
	}
	want := []string{"mutatingwebhookconfigurations", "validatingadmissionpolicies", "validatingadmissionpolicies/status",
		"validatingadmissionpolicybindings", "validatingwebhookconfigurations"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("resources %v, want %v", names, want)
	}
}

// Clients that ask for protobuf (informers built with it, kubectl for
// some requests) get it: the kinds are in the protobuf codec's scheme.
func TestAdmissionRegistrationProtobuf(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	cfg := rest.CopyConfig(env.config)
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	hooks := newClientset(t, cfg).AdmissionregistrationV1().ValidatingWebhookConfigurations()
	created, err := hooks.Create(testCtx(t), &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "pb"},
		Webhooks:   []admissionregistrationv1.ValidatingWebhook{testWebhook("pods.example.com")},
	}, metav1.CreateOptions{})
	if err != nil || *created.Webhooks[0].TimeoutSeconds != 10 {
		t.Fatalf("protobuf create: %+v, %v", created, err)
	}
	code, hdr, body := rawDo(t, env, "GET", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", "",
		"application/vnd.kubernetes.protobuf", nil)
	if code != 200 || hdr.Get("Content-Type") != "application/vnd.kubernetes.protobuf" || !strings.Contains(string(body), "pods.example.com") {
		t.Errorf("protobuf list: HTTP %d %s: %q", code, hdr.Get("Content-Type"), body)
	}
	// A delete's options arrive as the group version's DeleteOptions.
	if err := hooks.Delete(testCtx(t), "pb", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Errorf("protobuf delete: %v", err)
	}
}
