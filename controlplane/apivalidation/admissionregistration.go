package apivalidation

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/kubernetes/pkg/apis/admissionregistration"
	admissionvalidation "k8s.io/kubernetes/pkg/apis/admissionregistration/validation"
	corevalidation "k8s.io/kubernetes/pkg/apis/core/validation"
	"k8s.io/kubernetes/pkg/registry/admissionregistration/mutatingwebhookconfiguration"
	"k8s.io/kubernetes/pkg/registry/admissionregistration/validatingwebhookconfiguration"
)

// validateAdmissionRegistration runs the validation of upstream's
// admissionregistration.k8s.io strategies
// (pkg/registry/admissionregistration/*/strategy.go); old is nil on
// create, status marks an update of a policy's status subresource.
//
// The policies' validation compiles their CEL expressions (upstream's
// validation builds its own CEL environment). What the strategies add
// with the request's user, the check that the writer may read a policy's
// paramKind or a binding's paramRef, needs the caller and the authorizer,
// which these hooks do not get; it is not done.
func validateAdmissionRegistration(obj, old runtime.Object, status bool) (field.ErrorList, bool) {
	switch o := obj.(type) {
	case *admissionregistration.MutatingWebhookConfiguration:
		if old == nil {
			return append(admissionvalidation.ValidateMutatingWebhookConfiguration(o), staticSuffix(o.Name)...), true
		}
		oldC := old.(*admissionregistration.MutatingWebhookConfiguration)
		return append(metaUpdate(&o.ObjectMeta, &oldC.ObjectMeta), admissionvalidation.ValidateMutatingWebhookConfigurationUpdate(o, oldC)...), true
	case *admissionregistration.ValidatingWebhookConfiguration:
		if old == nil {
			return append(admissionvalidation.ValidateValidatingWebhookConfiguration(o), staticSuffix(o.Name)...), true
		}
		oldC := old.(*admissionregistration.ValidatingWebhookConfiguration)
		return append(metaUpdate(&o.ObjectMeta, &oldC.ObjectMeta), admissionvalidation.ValidateValidatingWebhookConfigurationUpdate(o, oldC)...), true
	case *admissionregistration.ValidatingAdmissionPolicy:
		if old == nil {
			return append(admissionvalidation.ValidateValidatingAdmissionPolicy(o), staticSuffix(o.Name)...), true
		}
		oldP := old.(*admissionregistration.ValidatingAdmissionPolicy)
		if status {
			// The status strategy checks the type-checking warnings and
			// the conditions; the metadata is the stored one's.
			return admissionvalidation.ValidateValidatingAdmissionPolicyStatusUpdate(o, oldP), true
		}
		return append(metaUpdate(&o.ObjectMeta, &oldP.ObjectMeta), admissionvalidation.ValidateValidatingAdmissionPolicyUpdate(o, oldP)...), true
	case *admissionregistration.ValidatingAdmissionPolicyBinding:
		if old == nil {
			return append(admissionvalidation.ValidateValidatingAdmissionPolicyBinding(o), staticSuffix(o.Name)...), true
		}
		oldB := old.(*admissionregistration.ValidatingAdmissionPolicyBinding)
		return append(metaUpdate(&o.ObjectMeta, &oldB.ObjectMeta), admissionvalidation.ValidateValidatingAdmissionPolicyBindingUpdate(o, oldB)...), true
	}
	return nil, false
}

// staticSuffix refuses, on create only as upstream's strategies do, the
// names ending in ".static.k8s.io" that upstream keeps for configurations
// loaded from manifests at start (the gate is beta and on).
func staticSuffix(name string) field.ErrorList {
	if !utilfeature.DefaultFeatureGate.Enabled(features.ManifestBasedAdmissionControlConfig) {
		return nil
	}
	return admissionvalidation.ValidateStaticSuffix(name, field.NewPath("metadata", "name"))
}

// metaUpdate is the generic store's common check of an update's metadata
// (immutable name, uid, creation time...), which upstream runs before the
// strategy's and which these kinds' update validation leaves out.
func metaUpdate(meta, old *metav1.ObjectMeta) field.ErrorList {
	return corevalidation.ValidateObjectMetaUpdate(meta, old, field.NewPath("metadata"))
}

// webhookWarnings returns the warnings of upstream's webhook configuration
// strategies (rules naming resources that webhooks never see, such as the
// access reviews); old is nil on create. The policies' strategies warn
// only about the reserved ".static.k8s.io" suffix, which their create
// validation refuses and names cannot change to, so they get no hooks.
func webhookWarnings(ctx context.Context, obj, old runtime.Object) ([]string, bool) {
	switch o := obj.(type) {
	case *admissionregistration.MutatingWebhookConfiguration:
		if old == nil {
			return mutatingwebhookconfiguration.Strategy.WarningsOnCreate(ctx, o), true
		}
		return mutatingwebhookconfiguration.Strategy.WarningsOnUpdate(ctx, o, old), true
	case *admissionregistration.ValidatingWebhookConfiguration:
		if old == nil {
			return validatingwebhookconfiguration.Strategy.WarningsOnCreate(ctx, o), true
		}
		return validatingwebhookconfiguration.Strategy.WarningsOnUpdate(ctx, o, old), true
	}
	return nil, false
}
