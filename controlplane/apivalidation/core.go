package apivalidation

import (
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	podutil "k8s.io/kubernetes/pkg/api/pod"
	"k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/apis/core/helper"
	corevalidation "k8s.io/kubernetes/pkg/apis/core/validation"
	volumevalidation "k8s.io/kubernetes/pkg/volume/validation"
)

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
	case *core.ReplicationController:
		opts := podutil.GetValidationOptionsFromPodTemplate(o.Spec.Template, nil)
		return corevalidation.ValidateReplicationController(o, opts), true
	case *core.PodTemplate:
		opts := podutil.GetValidationOptionsFromPodTemplate(&o.Template, nil)
		return corevalidation.ValidatePodTemplate(o, opts), true
	case *core.PersistentVolumeClaim:
		return corevalidation.ValidatePersistentVolumeClaim(o, corevalidation.ValidationOptionsForPersistentVolumeClaim(o, nil)), true
	case *core.PersistentVolume:
		errs := corevalidation.ValidatePersistentVolume(o, corevalidation.ValidationOptionsForPersistentVolume(o, nil))
		return append(errs, volumevalidation.ValidatePersistentVolume(o)...), true
	case *core.LimitRange:
		return corevalidation.ValidateLimitRange(o), true
	case *core.ResourceQuota:
		return corevalidation.ValidateResourceQuota(o), true
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
	case *core.ReplicationController:
		return validateRCUpdate(o, old.(*core.ReplicationController)), true
	case *core.PodTemplate:
		oldT := old.(*core.PodTemplate)
		opts := podutil.GetValidationOptionsFromPodTemplate(&o.Template, &oldT.Template)
		return corevalidation.ValidatePodTemplateUpdate(o, oldT, opts), true
	case *core.PersistentVolumeClaim:
		oldPVC := old.(*core.PersistentVolumeClaim)
		opts := corevalidation.ValidationOptionsForPersistentVolumeClaim(o, oldPVC)
		return corevalidation.ValidatePersistentVolumeClaimUpdate(o, oldPVC, opts), true
	case *core.PersistentVolume:
		oldPV := old.(*core.PersistentVolume)
		opts := corevalidation.ValidationOptionsForPersistentVolume(o, oldPV)
		errs := corevalidation.ValidatePersistentVolume(o, opts)
		errs = append(errs, volumevalidation.ValidatePersistentVolume(o)...)
		return append(errs, corevalidation.ValidatePersistentVolumeUpdate(o, oldPV, opts)...), true
	case *core.LimitRange:
		// Upstream's strategy validates an update as a create; the metadata
		// update rules come from the generic store's common checks, which
		// the API server here leaves to each kind's validation.
		errs := corevalidation.ValidateObjectMetaUpdate(&o.ObjectMeta, &old.(*core.LimitRange).ObjectMeta, field.NewPath("metadata"))
		return append(errs, corevalidation.ValidateLimitRange(o)...), true
	case *core.ResourceQuota:
		return corevalidation.ValidateResourceQuotaUpdate(o, old.(*core.ResourceQuota)), true
	}
	return nil, false
}

// validateRCUpdate is upstream's replication controller strategy
// ValidateUpdate: the update validation, then the fields an older version
// recorded as not convertible may not change.
func validateRCUpdate(rc, old *core.ReplicationController) field.ErrorList {
	opts := podutil.GetValidationOptionsFromPodTemplate(rc.Spec.Template, old.Spec.Template)
	errs := corevalidation.ValidateReplicationControllerUpdate(rc, old, opts)
	for key, value := range helper.NonConvertibleFields(old.Annotations) {
		parts := strings.Split(key, "/")
		if len(parts) != 2 {
			continue
		}
		broken := parts[1]
		switch {
		case strings.Contains(broken, "selector"):
			if !apiequality.Semantic.DeepEqual(old.Spec.Selector, rc.Spec.Selector) {
				errs = append(errs, field.Invalid(field.NewPath("spec").Child("selector"), rc.Spec.Selector, "cannot update non-convertible selector"))
			}
		default:
			errs = append(errs, &field.Error{Type: field.ErrorTypeNotFound, BadValue: value, Field: broken, Detail: "unknown non-convertible field"})
		}
	}
	return errs
}
