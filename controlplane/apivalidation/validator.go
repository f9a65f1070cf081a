// Package apivalidation defaults and validates the control plane's API
// objects with upstream's own code: the generated v1 defaulters and the
// pkg/apis/<group>/validation packages of k8s.io/kubernetes. Objects arrive
// as k8s.io/api (v1) types; validation runs on the internal types, as in
// kube-apiserver, after a conversion through a scheme of our own (not
// legacyscheme, so nothing here depends on init-time registration).
//
// Only the control plane imports this package: k8s.io/kubernetes must stay
// out of the node agent's binary.
package apivalidation

import (
	"fmt"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kube-aggregator/pkg/apis/apiregistration"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/kubernetes/pkg/apis/admissionregistration"
	admissionregistrationv1 "k8s.io/kubernetes/pkg/apis/admissionregistration/v1"
	"k8s.io/kubernetes/pkg/apis/apps"
	appsv1 "k8s.io/kubernetes/pkg/apis/apps/v1"
	"k8s.io/kubernetes/pkg/apis/authentication"
	authenticationapiv1 "k8s.io/kubernetes/pkg/apis/authentication/v1"
	"k8s.io/kubernetes/pkg/apis/autoscaling"
	autoscalingv1 "k8s.io/kubernetes/pkg/apis/autoscaling/v1"
	autoscalingv2 "k8s.io/kubernetes/pkg/apis/autoscaling/v2"
	"k8s.io/kubernetes/pkg/apis/batch"
	batchv1 "k8s.io/kubernetes/pkg/apis/batch/v1"
	"k8s.io/kubernetes/pkg/apis/certificates"
	certificatesv1 "k8s.io/kubernetes/pkg/apis/certificates/v1"
	"k8s.io/kubernetes/pkg/apis/coordination"
	coordinationv1 "k8s.io/kubernetes/pkg/apis/coordination/v1"
	"k8s.io/kubernetes/pkg/apis/core"
	corev1 "k8s.io/kubernetes/pkg/apis/core/v1"
	corevalidation "k8s.io/kubernetes/pkg/apis/core/validation"
	"k8s.io/kubernetes/pkg/apis/discovery"
	discoveryv1 "k8s.io/kubernetes/pkg/apis/discovery/v1"
	"k8s.io/kubernetes/pkg/apis/events"
	eventsapiv1 "k8s.io/kubernetes/pkg/apis/events/v1"
	"k8s.io/kubernetes/pkg/apis/flowcontrol"
	flowcontrolapiv1 "k8s.io/kubernetes/pkg/apis/flowcontrol/v1"
	"k8s.io/kubernetes/pkg/apis/node"
	nodev1 "k8s.io/kubernetes/pkg/apis/node/v1"
	"k8s.io/kubernetes/pkg/apis/policy"
	policyv1 "k8s.io/kubernetes/pkg/apis/policy/v1"
	"k8s.io/kubernetes/pkg/apis/rbac"
	rbacapiv1 "k8s.io/kubernetes/pkg/apis/rbac/v1"
	"k8s.io/kubernetes/pkg/apis/scheduling"
	schedulingv1 "k8s.io/kubernetes/pkg/apis/scheduling/v1"
	"k8s.io/kubernetes/pkg/apis/storage"
	storageapiv1 "k8s.io/kubernetes/pkg/apis/storage/v1"
)

// Validator holds the scheme that knows the served groups' v1 and internal
// types, their defaulters and the conversions between them.
type Validator struct {
	scheme *runtime.Scheme
}

// New builds a Validator. Registering the groups fails only on a
// programming error (a type registered twice), so New panics then, as
// upstream's install packages do.
func New() *Validator {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		core.AddToScheme, corev1.AddToScheme,
		apps.AddToScheme, appsv1.AddToScheme,
		coordination.AddToScheme, coordinationv1.AddToScheme,
		discovery.AddToScheme, discoveryv1.AddToScheme,
		batch.AddToScheme, batchv1.AddToScheme,
		policy.AddToScheme, policyv1.AddToScheme,
		scheduling.AddToScheme, schedulingv1.AddToScheme,
		node.AddToScheme, nodev1.AddToScheme,
		autoscaling.AddToScheme, autoscalingv1.AddToScheme, autoscalingv2.AddToScheme,
		events.AddToScheme, eventsapiv1.AddToScheme,
		flowcontrol.AddToScheme, flowcontrolapiv1.AddToScheme,
		authentication.AddToScheme, authenticationapiv1.AddToScheme,
		rbac.AddToScheme, rbacapiv1.AddToScheme,
		storage.AddToScheme, storageapiv1.AddToScheme,
		admissionregistration.AddToScheme, admissionregistrationv1.AddToScheme,
		apiregistration.AddToScheme, apiregistrationv1.AddToScheme,
		certificates.AddToScheme, certificatesv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(fmt.Sprintf("apivalidation: build the scheme: %v", err))
		}
	}
	return &Validator{scheme: s}
}

// Default applies upstream's generated v1 defaulters to obj in place.
func (v *Validator) Default(obj runtime.Object) {
	v.scheme.Default(obj)
}

// toInternal converts a v1 object to its internal type. Generated
// conversions share memory with the input where layouts match, so the
// result must be treated as read-only (validation only reads it).
func (v *Validator) toInternal(obj runtime.Object) (runtime.Object, error) {
	kinds, _, err := v.scheme.ObjectKinds(obj)
	if err != nil {
		return nil, fmt.Errorf("convert %T for validation: %w", obj, err)
	}
	gvk := kinds[0]
	gvk.Version = runtime.APIVersionInternal
	out, err := v.scheme.New(gvk)
	if err != nil {
		return nil, fmt.Errorf("convert %s for validation: %w", kinds[0], err)
	}
	if err := v.scheme.Convert(obj, out, nil); err != nil {
		return nil, fmt.Errorf("convert %s for validation: %w", kinds[0], err)
	}
	return out, nil
}

// internalPair converts obj and old for an update's validation.
func (v *Validator) internalPair(obj, old runtime.Object) (runtime.Object, runtime.Object, error) {
	in, err := v.toInternal(obj)
	if err != nil {
		return nil, nil, err
	}
	oldIn, err := v.toInternal(old)
	if err != nil {
		return nil, nil, err
	}
	return in, oldIn, nil
}

// Convert converts in (left unchanged) into out, another version or group
// of the same kind, through the internal type as kube-apiserver does, and
// then applies out's defaulters, as a decode into out's version would:
// autoscaling/v1 and v2 HorizontalPodAutoscalers, core/v1 and
// events.k8s.io/v1 Events.
func (v *Validator) Convert(in, out runtime.Object) error {
	internal, err := v.toInternal(in.DeepCopyObject())
	if err != nil {
		return err
	}
	if err := v.scheme.Convert(internal, out, nil); err != nil {
		return fmt.Errorf("convert %T to %T: %w", in, out, err)
	}
	v.scheme.Default(out)
	return nil
}

// Internal returns obj (a v1 object, left unchanged) as its internal
// type, for code of upstream's that works on those (admission plugins).
func (v *Validator) Internal(obj runtime.Object) (runtime.Object, error) {
	return v.toInternal(obj.DeepCopyObject())
}

// External converts an internal object back into out, a v1 object of the
// same kind, replacing all of out's fields. in must not be used after.
func (v *Validator) External(in, out runtime.Object) error {
	if err := v.scheme.Convert(in, out, nil); err != nil {
		return fmt.Errorf("convert %T to %T: %w", in, out, err)
	}
	return nil
}

// Scheme is the scheme of the served groups' v1 and internal types. It
// must not be changed.
func (v *Validator) Scheme() *runtime.Scheme { return v.scheme }

// eventVersion is the version an Event was sent in: upstream validates
// events.k8s.io/v1 Events more strictly than core/v1 ones.
func eventVersion(obj runtime.Object) schema.GroupVersion {
	if _, ok := obj.(*eventsv1.Event); ok {
		return eventsv1.SchemeGroupVersion
	}
	return schema.GroupVersion{Version: "v1"}
}

// Validate validates obj for create.
func (v *Validator) Validate(obj runtime.Object) field.ErrorList {
	in, err := v.toInternal(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	if ev, ok := in.(*core.Event); ok {
		return corevalidation.ValidateEventCreate(ev, eventVersion(obj))
	}
	if errs, ok := validateAutoscaling(in, nil, false); ok {
		return errs
	}
	if errs, ok := validateCoreCreate(in); ok {
		return errs
	}
	if errs, ok := validateGroupsCreate(in); ok {
		return errs
	}
	if errs, ok := validateNodeGroup(in, nil); ok {
		return errs
	}
	if errs, ok := validateRBAC(in, nil); ok {
		return errs
	}
	if errs, ok := validateAdmissionRegistration(in, nil, false); ok {
		return errs
	}
	if errs, ok := validateAPIRegistration(in, nil, false); ok {
		return errs
	}
	if errs, ok := validateFlowControl(in, nil, false); ok {
		return errs
	}
	if errs, ok := validateCertificates(in, nil, csrMain); ok {
		return errs
	}
	return unsupported("create", obj)
}

// ValidateUpdate validates an update of the main resource.
func (v *Validator) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	in, oldIn, err := v.internalPair(obj, old)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	if ev, ok := in.(*core.Event); ok {
		return corevalidation.ValidateEventUpdate(ev, oldIn.(*core.Event), eventVersion(obj))
	}
	if errs, ok := validateAutoscaling(in, oldIn, false); ok {
		return errs
	}
	if errs, ok := validateCoreUpdate(in, oldIn); ok {
		return errs
	}
	if errs, ok := validateGroupsUpdate(in, oldIn); ok {
		return errs
	}
	if errs, ok := validateNodeGroup(in, oldIn); ok {
		return errs
	}
	if errs, ok := validateRBAC(in, oldIn); ok {
		return errs
	}
	if errs, ok := validateAdmissionRegistration(in, oldIn, false); ok {
		return errs
	}
	if errs, ok := validateAPIRegistration(in, oldIn, false); ok {
		return errs
	}
	if errs, ok := validateFlowControl(in, oldIn, false); ok {
		return errs
	}
	if errs, ok := validateCertificates(in, oldIn, csrMain); ok {
		return errs
	}
	return unsupported("update", obj)
}

// ValidateStatusUpdate validates an update of the status subresource.
func (v *Validator) ValidateStatusUpdate(obj, old runtime.Object) field.ErrorList {
	in, oldIn, err := v.internalPair(obj, old)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	if errs, ok := validateAutoscaling(in, oldIn, true); ok {
		return errs
	}
	if errs, ok := validateStatusUpdate(in, oldIn); ok {
		return errs
	}
	if errs, ok := validateAdmissionRegistration(in, oldIn, true); ok {
		return errs
	}
	if errs, ok := validateAPIRegistration(in, oldIn, true); ok {
		return errs
	}
	if errs, ok := validateFlowControl(in, oldIn, true); ok {
		return errs
	}
	if errs, ok := validateCertificates(in, oldIn, csrStatus); ok {
		return errs
	}
	return unsupported("status update", obj)
}

// ValidateFinalizeUpdate validates an update of namespaces/finalize.
func (v *Validator) ValidateFinalizeUpdate(obj, old runtime.Object) field.ErrorList {
	in, oldIn, err := v.internalPair(obj, old)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	ns, ok1 := in.(*core.Namespace)
	oldNS, ok2 := oldIn.(*core.Namespace)
	if !ok1 || !ok2 {
		return unsupported("finalize", obj)
	}
	return corevalidation.ValidateNamespaceFinalizeUpdate(ns, oldNS)
}

// ValidateEphemeralContainersUpdate validates an update of
// pods/ephemeralcontainers.
func (v *Validator) ValidateEphemeralContainersUpdate(obj, old runtime.Object) field.ErrorList {
	in, oldIn, err := v.internalPair(obj, old)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	pod, ok1 := in.(*core.Pod)
	oldPod, ok2 := oldIn.(*core.Pod)
	if !ok1 || !ok2 {
		return unsupported("ephemeral containers", obj)
	}
	return corevalidation.ValidatePodEphemeralContainersUpdate(pod, oldPod, podOptions(pod, oldPod))
}

// unsupported reports a kind this package has no upstream validation for:
// a wiring mistake in the registry, surfaced as a 500 rather than letting
// the object in unchecked.
func unsupported(op string, obj runtime.Object) field.ErrorList {
	return field.ErrorList{field.InternalError(nil, fmt.Errorf("apivalidation: no upstream %s validation for %T", op, obj))}
}
