package apivalidation

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	podutil "k8s.io/kubernetes/pkg/api/pod"
	"k8s.io/kubernetes/pkg/apis/core"
	corevalidation "k8s.io/kubernetes/pkg/apis/core/validation"
)

// eventVersion is the version core events are served at; upstream's event
// validation is stricter for events.k8s.io, which is not served here.
var eventVersion = schema.GroupVersion{Version: "v1"}

// podOptions are the PodValidationOptions upstream's pod strategy uses:
// derived from the new and old pod, with ResourceIsPod set.
func podOptions(pod, old *core.Pod) corevalidation.PodValidationOptions {
	var oldSpec *core.PodSpec
	var oldMeta *metav1.ObjectMeta
	if old != nil {
		oldSpec, oldMeta = &old.Spec, &old.ObjectMeta
	}
	opts := podutil.GetValidationOptionsFromPodSpecAndMeta(&pod.Spec, oldSpec, &pod.ObjectMeta, oldMeta)
	opts.ResourceIsPod = true
	return opts
}

// validateCoreCreate runs the create validation of upstream's core strategies.
func validateCoreCreate(obj runtime.Object) (field.ErrorList, bool) {
	switch o := obj.(type) {
	case *core.Pod:
		return corevalidation.ValidatePodCreate(o, podOptions(o, nil)), true
	case *core.Service:
		return corevalidation.ValidateServiceCreate(o), true
	case *core.Node:
		return corevalidation.ValidateNode(o), true
	case *core.Namespace:
		return corevalidation.ValidateNamespace(o), true
	case *core.ConfigMap:
		return corevalidation.ValidateConfigMap(o), true
	case *core.Secret:
		return corevalidation.ValidateSecret(o), true
	case *core.ServiceAccount:
		return corevalidation.ValidateServiceAccount(o), true
	case *core.Endpoints:
		return corevalidation.ValidateEndpointsCreate(o), true
	case *core.Event:
		return corevalidation.ValidateEventCreate(o, eventVersion), true
	}
	return nil, false
}

// validateCoreUpdate runs the update validation of upstream's core strategies.
func validateCoreUpdate(obj, old runtime.Object) (field.ErrorList, bool) {
	switch o := obj.(type) {
	case *core.Pod:
		oldPod := old.(*core.Pod)
		return corevalidation.ValidatePodUpdate(o, oldPod, podOptions(o, oldPod)), true
	case *core.Service:
		return corevalidation.ValidateServiceUpdate(o, old.(*core.Service)), true
	case *core.Node:
		return corevalidation.ValidateNodeUpdate(o, old.(*core.Node)), true
	case *core.Namespace:
		return corevalidation.ValidateNamespaceUpdate(o, old.(*core.Namespace)), true
	case *core.ConfigMap:
		return corevalidation.ValidateConfigMapUpdate(o, old.(*core.ConfigMap)), true
	case *core.Secret:
		return corevalidation.ValidateSecretUpdate(o, old.(*core.Secret)), true
	case *core.ServiceAccount:
		return corevalidation.ValidateServiceAccountUpdate(o, old.(*core.ServiceAccount)), true
	case *core.Endpoints:
		return corevalidation.ValidateEndpointsUpdate(o, old.(*core.Endpoints)), true
	case *core.Event:
		return corevalidation.ValidateEventUpdate(o, old.(*core.Event), eventVersion), true
	}
	return nil, false
}
