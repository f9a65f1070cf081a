package registry

import (
	"reflect"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The admissionregistration.k8s.io/v1 kinds that kubectl, informers and
// charts shipping webhooks or policies use, in upstream's discovery order,
// as upstream's strategies (pkg/registry/admissionregistration) serve
// them: cluster-scoped, in the "api-extensions" category, with a
// generation of 1 on create that upstream bumps when the webhooks (for
// the webhook configurations) or the spec (for the policies and bindings)
// change. The v1 defaulters (failurePolicy Fail, matchPolicy Equivalent,
// empty selectors, timeoutSeconds 10, reinvocationPolicy Never, rule
// scope "*", service port 443) come from the registry's Default.
// Upstream also serves mutatingadmissionpolicies (+bindings) in v1; they
// are not served here.
func admissionRegistrationResources() []*Resource {
	return []*Resource{
		mutatingWebhookConfigurationResource(),
		validatingAdmissionPolicyResource(),
		validatingAdmissionPolicyBindingResource(),
		validatingWebhookConfigurationResource(),
	}
}

func admissionResource(name, kind string, newObj, newList func() runtime.Object) *Resource {
	return &Resource{
		GroupVersion:    admissionregistrationv1.SchemeGroupVersion,
		Name:            name,
		Kind:            kind,
		ListKind:        kind + "List",
		Categories:      []string{"api-extensions"},
		Verbs:           allVerbs(),
		New:             newObj,
		NewList:         newList,
		TrackGeneration: true,
	}
}

// The webhook configurations' generation follows their webhooks alone,
// compared as upstream's strategies compare them (reflect.DeepEqual, not
// the semantic equality the policies use).
func mutatingWebhookConfigurationResource() *Resource {
	r := admissionResource("mutatingwebhookconfigurations", "MutatingWebhookConfiguration",
		func() runtime.Object { return &admissionregistrationv1.MutatingWebhookConfiguration{} },
		func() runtime.Object { return &admissionregistrationv1.MutatingWebhookConfigurationList{} })
	r.SpecChanged = changed(func(c, old *admissionregistrationv1.MutatingWebhookConfiguration) bool {
		return !reflect.DeepEqual(c.Webhooks, old.Webhooks)
	})
	r.Columns = webhookConfigurationColumns()
	r.Row = row(func(c *admissionregistrationv1.MutatingWebhookConfiguration, now time.Time) []interface{} {
		return []interface{}{c.Name, int64(len(c.Webhooks)), age(c.CreationTimestamp, now)}
	})
	return r
}

func validatingWebhookConfigurationResource() *Resource {
	r := admissionResource("validatingwebhookconfigurations", "ValidatingWebhookConfiguration",
		func() runtime.Object { return &admissionregistrationv1.ValidatingWebhookConfiguration{} },
		func() runtime.Object { return &admissionregistrationv1.ValidatingWebhookConfigurationList{} })
	r.SpecChanged = changed(func(c, old *admissionregistrationv1.ValidatingWebhookConfiguration) bool {
		return !reflect.DeepEqual(c.Webhooks, old.Webhooks)
	})
	r.Columns = webhookConfigurationColumns()
	r.Row = row(func(c *admissionregistrationv1.ValidatingWebhookConfiguration, now time.Time) []interface{} {
		return []interface{}{c.Name, int64(len(c.Webhooks)), age(c.CreationTimestamp, now)}
	})
	return r
}

// validatingAdmissionPolicyResource: the status (type-checking warnings
// and conditions) belongs to upstream's policy status controller, so a
// create resets it, an update of the policy keeps it, and a status update
// keeps the spec and the metadata. Nothing here type-checks policies and
// writes their status: that controller is not run.
func validatingAdmissionPolicyResource() *Resource {
	r := admissionResource("validatingadmissionpolicies", "ValidatingAdmissionPolicy",
		func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicy{} },
		func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicyList{} })
	r.Subresources = []string{"status"}
	r.PrepareForCreate = mutate(func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
		p.Status = admissionregistrationv1.ValidatingAdmissionPolicyStatus{}
	})
	r.PrepareForUpdate = mutate2(func(p, old *admissionregistrationv1.ValidatingAdmissionPolicy) {
		p.Status = *old.Status.DeepCopy()
	})
	r.PrepareForStatusUpdate = mutate2(func(p, old *admissionregistrationv1.ValidatingAdmissionPolicy) {
		p.Spec = *old.Spec.DeepCopy()
		keepMetaForStatus(&p.ObjectMeta, &old.ObjectMeta)
	})
	r.SpecChanged = changed(func(p, old *admissionregistrationv1.ValidatingAdmissionPolicy) bool {
		return !apiequality.Semantic.DeepEqual(p.Spec, old.Spec)
	})
	r.Columns = []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Validations", Type: "integer", Description: "Validations indicates the number of validation rules defined in this configuration"},
		{Name: "ParamKind", Type: "string", Description: "ParamKind specifies the kind of resources used to parameterize this policy"},
		ageColumn(),
	}
	r.Row = row(validatingAdmissionPolicyRow)
	return r
}

func validatingAdmissionPolicyBindingResource() *Resource {
	r := admissionResource("validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding",
		func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{} },
		func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicyBindingList{} })
	r.SpecChanged = changed(func(b, old *admissionregistrationv1.ValidatingAdmissionPolicyBinding) bool {
		return !apiequality.Semantic.DeepEqual(b.Spec, old.Spec)
	})
	r.Columns = []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "PolicyName", Type: "string", Description: "PolicyName indicates the policy definition which the policy binding binded to"},
		{Name: "ParamRef", Type: "string", Description: "ParamRef indicates the param resource which sets the configuration param"},
		ageColumn(),
	}
	r.Row = row(validatingAdmissionPolicyBindingRow)
	return r
}

func webhookConfigurationColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Webhooks", Type: "integer", Description: "Webhooks indicates the number of webhooks registered in this configuration"},
		ageColumn(),
	}
}

// validatingAdmissionPolicyRow is upstream's printValidatingAdmissionPolicy:
// the paramKind as "apiVersion/kind", or <unset>.
func validatingAdmissionPolicyRow(p *admissionregistrationv1.ValidatingAdmissionPolicy, now time.Time) []interface{} {
	paramKind := "<unset>"
	if p.Spec.ParamKind != nil {
		paramKind = p.Spec.ParamKind.APIVersion + "/" + p.Spec.ParamKind.Kind
	}
	return []interface{}{p.Name, int64(len(p.Spec.Validations)), paramKind, age(p.CreationTimestamp, now)}
}

// validatingAdmissionPolicyBindingRow is upstream's
// printValidatingAdmissionPolicyBinding: a named param as
// "namespace/name" ("*/name" without a namespace, since the printer
// cannot tell a cluster-scoped param), else its selector in the
// generated String form, else <unset>.
func validatingAdmissionPolicyBindingRow(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding, now time.Time) []interface{} {
	param := "<unset>"
	if pr := b.Spec.ParamRef; pr != nil {
		switch {
		case pr.Name != "" && pr.Namespace != "":
			param = pr.Namespace + "/" + pr.Name
		case pr.Name != "":
			param = "*/" + pr.Name
		case pr.Selector != nil:
			param = pr.Selector.String()
		}
	}
	return []interface{}{b.Name, b.Spec.PolicyName, param, age(b.CreationTimestamp, now)}
}
