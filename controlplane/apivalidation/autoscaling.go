package apivalidation

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/kubernetes/pkg/apis/autoscaling"
	autoscalingvalidation "k8s.io/kubernetes/pkg/apis/autoscaling/validation"
	"k8s.io/kubernetes/pkg/features"
)

// validateAutoscaling runs upstream's HorizontalPodAutoscaler strategy
// validation: create (old nil), update, or status update.
func validateAutoscaling(obj, old runtime.Object, status bool) (field.ErrorList, bool) {
	hpa, ok := obj.(*autoscaling.HorizontalPodAutoscaler)
	if !ok {
		return nil, false
	}
	if old == nil {
		return autoscalingvalidation.ValidateHorizontalPodAutoscaler(hpa, hpaOptions(hpa, nil)), true
	}
	oldHPA := old.(*autoscaling.HorizontalPodAutoscaler)
	if status {
		return autoscalingvalidation.ValidateHorizontalPodAutoscalerStatusUpdate(hpa, oldHPA), true
	}
	return autoscalingvalidation.ValidateHorizontalPodAutoscalerUpdate(hpa, oldHPA, hpaOptions(hpa, oldHPA)), true
}

// hpaOptions are the options of upstream's autoscaler strategy
// (pkg/registry/autoscaling/horizontalpodautoscaler/strategy.go), which
// keeps them unexported: scale to zero where the gate (beta, on) allows it
// or the old object already has it, and the scale target's apiVersion
// checked only when the target changes.
func hpaOptions(hpa, old *autoscaling.HorizontalPodAutoscaler) autoscalingvalidation.HorizontalPodAutoscalerSpecValidationOptions {
	opts := autoscalingvalidation.HorizontalPodAutoscalerSpecValidationOptions{
		MinReplicasLowerBound: 1,
		ScaleTargetRefValidationOptions: autoscalingvalidation.CrossVersionObjectReferenceValidationOptions{
			RequiredCoveredByDeclarative: true,
		},
		ObjectMetricsValidationOptions: autoscalingvalidation.CrossVersionObjectReferenceValidationOptions{
			AllowEmptyAPIGroup: true,
		},
	}
	oldZero := old != nil && old.Spec.MinReplicas != nil && *old.Spec.MinReplicas == 0
	if utilfeature.DefaultFeatureGate.Enabled(features.HPAScaleToZero) || oldZero {
		opts.MinReplicasLowerBound = 0
	}
	switch {
	case old != nil && old.Spec.ScaleTargetRef.APIVersion == hpa.Spec.ScaleTargetRef.APIVersion &&
		old.Spec.ScaleTargetRef.Kind == hpa.Spec.ScaleTargetRef.Kind:
		opts.ScaleTargetRefValidationOptions.AllowInvalidAPIVersion = true
	case hpa.Spec.ScaleTargetRef.Kind == "ReplicationController":
		opts.ScaleTargetRefValidationOptions.AllowEmptyAPIGroup = true
	}
	if old != nil {
		for _, m := range old.Spec.Metrics {
			if m.Type != autoscaling.ObjectMetricSourceType || m.Object == nil {
				continue
			}
			if autoscalingvalidation.ValidateAPIVersion(m.Object.DescribedObject, opts.ObjectMetricsValidationOptions) != nil {
				opts.ObjectMetricsValidationOptions.AllowInvalidAPIVersion = true
				break
			}
		}
	}
	return opts
}
