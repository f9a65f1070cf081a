package registry

import (
	"reflect"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

func newRule() admissionregistrationv1.RuleWithOperations {
	return admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
	}
}

func newWebhookConfig() *admissionregistrationv1.ValidatingWebhookConfiguration {
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "policy-hooks"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "pods.example.com",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				Service: &admissionregistrationv1.ServiceReference{Namespace: "default", Name: "hook"},
			},
			Rules:                   []admissionregistrationv1.RuleWithOperations{newRule()},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
}

func newMutatingConfig() *admissionregistrationv1.MutatingWebhookConfiguration {
	v := newWebhookConfig().Webhooks[0]
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "defaults"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: v.Name, ClientConfig: v.ClientConfig, Rules: v.Rules, SideEffects: v.SideEffects,
			AdmissionReviewVersions: v.AdmissionReviewVersions,
		}},
	}
}

func newPolicy() *admissionregistrationv1.ValidatingAdmissionPolicy {
	return &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "replicas"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: newRule()}},
			},
			Validations: []admissionregistrationv1.Validation{{Expression: "object.spec.containers.size() < 5"}},
		},
	}
}

func newPolicyBinding() *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "replicas-binding"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        "replicas",
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources:    &admissionregistrationv1.MatchResources{},
		},
	}
}

// TestAdmissionRegistrationDefaults: upstream's v1 defaulters run on the
// four kinds.
func TestAdmissionRegistrationDefaults(t *testing.T) {
	m := newMutatingConfig()
	defaultWith(t, m)
	hook := m.Webhooks[0]
	if *hook.FailurePolicy != admissionregistrationv1.Fail || *hook.MatchPolicy != admissionregistrationv1.Equivalent ||
		*hook.TimeoutSeconds != 10 || *hook.ReinvocationPolicy != admissionregistrationv1.NeverReinvocationPolicy ||
		hook.NamespaceSelector == nil || hook.ObjectSelector == nil || *hook.Rules[0].Scope != admissionregistrationv1.AllScopes ||
		*hook.ClientConfig.Service.Port != 443 {
		t.Errorf("mutating webhook not defaulted: %+v", hook)
	}
	v := newWebhookConfig()
	defaultWith(t, v)
	if vh := v.Webhooks[0]; vh.FailurePolicy == nil || vh.TimeoutSeconds == nil || *vh.TimeoutSeconds != 10 || vh.SideEffects == nil {
		t.Errorf("validating webhook not defaulted: %+v", vh)
	}

	p := newPolicy()
	defaultWith(t, p)
	mc := p.Spec.MatchConstraints
	if *p.Spec.FailurePolicy != admissionregistrationv1.Fail || *mc.MatchPolicy != admissionregistrationv1.Equivalent ||
		mc.NamespaceSelector == nil || mc.ObjectSelector == nil || *mc.ResourceRules[0].Scope != admissionregistrationv1.AllScopes {
		t.Errorf("policy not defaulted: %+v", p.Spec)
	}
	b := newPolicyBinding()
	defaultWith(t, b)
	if b.Spec.MatchResources.MatchPolicy == nil || b.Spec.MatchResources.ObjectSelector == nil {
		t.Errorf("binding not defaulted: %+v", b.Spec)
	}
}

func TestValidateWebhookConfigurations(t *testing.T) {
	r := resourceByName(t, "validatingwebhookconfigurations")
	tests := []struct {
		name   string
		mutate func(*admissionregistrationv1.ValidatingWebhookConfiguration)
		want   []string
	}{
		{"valid", func(*admissionregistrationv1.ValidatingWebhookConfiguration) {}, nil},
		{"no sideEffects", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) { c.Webhooks[0].SideEffects = nil },
			[]string{"FieldValueRequired webhooks[0].sideEffects"}},
		{"sideEffects Unknown", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			c.Webhooks[0].SideEffects = ptr.To(admissionregistrationv1.SideEffectClassUnknown)
		}, []string{"FieldValueNotSupported webhooks[0].sideEffects"}},
		{"no review versions", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			c.Webhooks[0].AdmissionReviewVersions = nil
		},
			[]string{"FieldValueRequired webhooks[0].admissionReviewVersions"}},
		{"timeout", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			c.Webhooks[0].TimeoutSeconds = ptr.To[int32](31)
		},
			[]string{"FieldValueInvalid webhooks[0].timeoutSeconds"}},
		{"duplicate name", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			c.Webhooks = append(c.Webhooks, c.Webhooks[0])
		}, []string{"FieldValueDuplicate webhooks[1].name"}},
		{"reserved suffix", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) { c.Name = "hooks.static.k8s.io" },
			[]string{"FieldValueInvalid metadata.name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newWebhookConfig()
			tt.mutate(c)
			assertErrors(t, createErrors(r, c), tt.want)
		})
	}

	// An update keeps tolerating what the stored object already had (here
	// sideEffects Unknown), as upstream's update validation does, but
	// checks the metadata as the generic store does.
	old := newWebhookConfig()
	old.Webhooks[0].SideEffects = ptr.To(admissionregistrationv1.SideEffectClassUnknown)
	r.Default(old)
	old.ResourceVersion, old.UID = "3", "u1"
	upd := old.DeepCopy()
	upd.Webhooks[0].TimeoutSeconds = ptr.To[int32](5)
	assertErrors(t, r.ValidateUpdate(upd, old), nil)
	upd.UID = "u2"
	assertErrors(t, r.ValidateUpdate(upd, old), []string{"FieldValueInvalid metadata.uid"})

	m := resourceByName(t, "mutatingwebhookconfigurations")
	bad := newMutatingConfig()
	bad.Webhooks[0].ReinvocationPolicy = ptr.To(admissionregistrationv1.ReinvocationPolicyType("Always"))
	assertErrors(t, createErrors(m, bad), []string{"FieldValueNotSupported webhooks[0].reinvocationPolicy"})
}

func TestValidateValidatingAdmissionPolicy(t *testing.T) {
	r := resourceByName(t, "validatingadmissionpolicies")
	tests := []struct {
		name   string
		mutate func(*admissionregistrationv1.ValidatingAdmissionPolicy)
		want   []string
	}{
		{"valid", func(*admissionregistrationv1.ValidatingAdmissionPolicy) {}, nil},
		{"bad CEL", func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
			p.Spec.Validations[0].Expression = "object.spec.replicas >"
		},
			[]string{"FieldValueInvalid spec.validations[0].expression"}},
		{"not a bool", func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
			p.Spec.Validations[0].Expression = "'a string'"
		},
			[]string{"FieldValueInvalid spec.validations[0].expression"}},
		{"no rules", func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
			p.Spec.MatchConstraints.ResourceRules = nil
		},
			[]string{"FieldValueRequired spec.matchConstraints.resourceRules"}},
		{"no match constraints", func(p *admissionregistrationv1.ValidatingAdmissionPolicy) { p.Spec.MatchConstraints = nil },
			[]string{"FieldValueRequired spec.matchConstraints"}},
		{"nothing to check", func(p *admissionregistrationv1.ValidatingAdmissionPolicy) { p.Spec.Validations = nil },
			// Upstream reports the pair it wants one of.
			[]string{"FieldValueRequired spec.auditAnnotations", "FieldValueRequired spec.validations"}},
		{"variables", func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
			p.Spec.Variables = []admissionregistrationv1.Variable{{Name: "count", Expression: "object.spec.containers.size()"}}
			p.Spec.Validations[0].Expression = "variables.count < 5"
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPolicy()
			tt.mutate(p)
			assertErrors(t, createErrors(r, p), tt.want)
		})
	}

	old := newPolicy()
	r.Default(old)
	old.ResourceVersion = "4"
	st := old.DeepCopy()
	st.Status.Conditions = []metav1.Condition{{Type: "Bad Type", Status: metav1.ConditionTrue, Reason: "R", LastTransitionTime: metav1.Now()}}
	assertErrors(t, r.ValidateStatusUpdate(st, old), []string{"FieldValueInvalid status.conditions[0].type"})
	upd := old.DeepCopy()
	upd.Spec.Validations[0].Expression = "object.nope("
	assertErrors(t, r.ValidateUpdate(upd, old), []string{"FieldValueInvalid spec.validations[0].expression"})
}

func TestValidateValidatingAdmissionPolicyBinding(t *testing.T) {
	r := resourceByName(t, "validatingadmissionpolicybindings")
	tests := []struct {
		name   string
		mutate func(*admissionregistrationv1.ValidatingAdmissionPolicyBinding)
		want   []string
	}{
		{"valid", func(*admissionregistrationv1.ValidatingAdmissionPolicyBinding) {}, nil},
		{"no policy", func(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) { b.Spec.PolicyName = "" },
			[]string{"FieldValueRequired spec.policyName"}},
		{"no actions", func(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) { b.Spec.ValidationActions = nil },
			[]string{"FieldValueRequired spec.validationActions"}},
		{"param name and selector", func(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
			b.Spec.ParamRef = &admissionregistrationv1.ParamRef{Name: "p", Selector: &metav1.LabelSelector{},
				ParameterNotFoundAction: ptr.To(admissionregistrationv1.DenyAction)}
		}, []string{"FieldValueForbidden spec.paramRef.name", "FieldValueForbidden spec.paramRef.selector"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newPolicyBinding()
			tt.mutate(b)
			assertErrors(t, createErrors(r, b), tt.want)
		})
	}
}

// TestAdmissionRegistrationGeneration: upstream bumps the generation when
// the webhooks (configurations) or the spec (policies, bindings) change,
// not on metadata changes.
func TestAdmissionRegistrationGeneration(t *testing.T) {
	tests := []struct {
		name   string
		obj    runtime.Object
		change func(runtime.Object)
	}{
		{"mutatingwebhookconfigurations", newMutatingConfig(), func(o runtime.Object) {
			o.(*admissionregistrationv1.MutatingWebhookConfiguration).Webhooks[0].TimeoutSeconds = ptr.To[int32](3)
		}},
		{"validatingwebhookconfigurations", newWebhookConfig(), func(o runtime.Object) {
			o.(*admissionregistrationv1.ValidatingWebhookConfiguration).Webhooks[0].Rules[0].Resources = []string{"services"}
		}},
		{"validatingadmissionpolicies", newPolicy(), func(o runtime.Object) {
			o.(*admissionregistrationv1.ValidatingAdmissionPolicy).Spec.Validations[0].Message = "too many"
		}},
		{"validatingadmissionpolicybindings", newPolicyBinding(), func(o runtime.Object) {
			o.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding).Spec.PolicyName = "other"
		}},
	}
	for _, tt := range tests {
		r := resourceByName(t, tt.name)
		r.Default(tt.obj)
		if !r.TrackGeneration || !reflect.DeepEqual(r.Categories, []string{"api-extensions"}) {
			t.Errorf("%s: generation %v, categories %v", tt.name, r.TrackGeneration, r.Categories)
		}
		labeled := tt.obj.DeepCopyObject()
		accessorFor(labeled).SetLabels(map[string]string{"a": "b"})
		if r.SpecChanged(labeled, tt.obj) {
			t.Errorf("%s: a label change counts as a spec change", tt.name)
		}
		changedObj := tt.obj.DeepCopyObject()
		tt.change(changedObj)
		if !r.SpecChanged(changedObj, tt.obj) {
			t.Errorf("%s: a spec change is not seen", tt.name)
		}
	}
}

func accessorFor(obj runtime.Object) metav1.Object {
	return obj.(metav1.ObjectMetaAccessor).GetObjectMeta()
}

// TestPolicyStatusSplit: upstream resets a policy's status on create,
// keeps it on updates of the policy and keeps the spec and metadata on
// status updates.
func TestPolicyStatusSplit(t *testing.T) {
	r := resourceByName(t, "validatingadmissionpolicies")
	status := admissionregistrationv1.ValidatingAdmissionPolicyStatus{ObservedGeneration: 1,
		TypeChecking: &admissionregistrationv1.TypeChecking{}}
	p := newPolicy()
	p.Status = *status.DeepCopy()
	r.PrepareForCreate(p)
	if !reflect.DeepEqual(p.Status, admissionregistrationv1.ValidatingAdmissionPolicyStatus{}) {
		t.Errorf("create kept the status: %+v", p.Status)
	}

	old := newPolicy()
	r.Default(old)
	old.Status = *status.DeepCopy()
	upd := old.DeepCopy()
	upd.Status = admissionregistrationv1.ValidatingAdmissionPolicyStatus{}
	r.PrepareForUpdate(upd, old)
	if !reflect.DeepEqual(upd.Status, old.Status) {
		t.Errorf("update changed the status: %+v", upd.Status)
	}

	st := old.DeepCopy()
	st.Spec.Validations = nil
	st.Labels = map[string]string{"a": "b"}
	st.Status.ObservedGeneration = 2
	r.PrepareForStatusUpdate(st, old)
	if !reflect.DeepEqual(st.Spec, old.Spec) || st.Labels != nil || st.Status.ObservedGeneration != 2 {
		t.Errorf("status update: spec %+v, labels %v, status %+v", st.Spec, st.Labels, st.Status)
	}
}

func TestAdmissionRegistrationRows(t *testing.T) {
	now := time.Date(2025, 1, 3, 13, 0, 0, 0, time.UTC)
	created := metav1.NewTime(now.Add(-3 * time.Hour))
	v := newWebhookConfig()
	v.CreationTimestamp = created
	v.Webhooks = append(v.Webhooks, v.Webhooks[0])
	m := newMutatingConfig()
	m.CreationTimestamp = created
	p := newPolicy()
	p.CreationTimestamp = created
	withParam := p.DeepCopy()
	withParam.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
	b := newPolicyBinding()
	b.CreationTimestamp = created
	named, cluster, selected := b.DeepCopy(), b.DeepCopy(), b.DeepCopy()
	named.Spec.ParamRef = &admissionregistrationv1.ParamRef{Name: "limits", Namespace: "default"}
	cluster.Spec.ParamRef = &admissionregistrationv1.ParamRef{Name: "limits"}
	selected.Spec.ParamRef = &admissionregistrationv1.ParamRef{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}}

	tests := []struct {
		resource string
		obj      runtime.Object
		want     []interface{}
	}{
		{"validatingwebhookconfigurations", v, []interface{}{"policy-hooks", int64(2), "3h"}},
		{"mutatingwebhookconfigurations", m, []interface{}{"defaults", int64(1), "3h"}},
		{"validatingadmissionpolicies", p, []interface{}{"replicas", int64(1), "<unset>", "3h"}},
		{"validatingadmissionpolicies", withParam, []interface{}{"replicas", int64(1), "v1/ConfigMap", "3h"}},
		{"validatingadmissionpolicybindings", b, []interface{}{"replicas-binding", "replicas", "<unset>", "3h"}},
		{"validatingadmissionpolicybindings", named, []interface{}{"replicas-binding", "replicas", "default/limits", "3h"}},
		{"validatingadmissionpolicybindings", cluster, []interface{}{"replicas-binding", "replicas", "*/limits", "3h"}},
		{"validatingadmissionpolicybindings", selected, []interface{}{"replicas-binding", "replicas",
			"&LabelSelector{MatchLabels:map[string]string{a: b,},MatchExpressions:[]LabelSelectorRequirement{},}", "3h"}},
	}
	for _, tt := range tests {
		r := resourceByName(t, tt.resource)
		if got := r.Row(tt.obj, now); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s row = %q\nwant %q", tt.resource, got, tt.want)
		}
		if len(r.Columns) != len(tt.want) {
			t.Errorf("%s: %d columns for %d cells", tt.resource, len(r.Columns), len(tt.want))
		}
	}
}

// TestWebhookWarnings: upstream warns about rules naming resources that
// webhooks never see.
func TestWebhookWarnings(t *testing.T) {
	r := resourceByName(t, "validatingwebhookconfigurations")
	c := newWebhookConfig()
	c.Webhooks[0].Rules[0].APIGroups = []string{"authorization.k8s.io"}
	c.Webhooks[0].Rules[0].Resources = []string{"subjectaccessreviews"}
	r.Default(c)
	want := []string{"webhooks[0].rules[0]: subjectaccessreviews.authorization.k8s.io is excluded from admission webhooks; this rule will have no effect"}
	if got := r.WarningsOnCreate(c); !reflect.DeepEqual(got, want) {
		t.Errorf("warnings = %q\nwant %q", got, want)
	}
	if got := r.WarningsOnUpdate(c, newWebhookConfig()); !reflect.DeepEqual(got, want) {
		t.Errorf("update warnings = %q\nwant %q", got, want)
	}
	if got := r.WarningsOnCreate(newWebhookConfig()); len(got) > 0 {
		t.Errorf("warnings for pods: %q", got)
	}
}
