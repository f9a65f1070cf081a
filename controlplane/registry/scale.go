package registry

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// ScaleOf returns the scale subresource (autoscaling/v1 Scale) of a
// deployment, replica set, stateful set or replication controller: its metadata (name, namespace, uid,
// resourceVersion, creationTimestamp), spec.replicas, status.replicas and the
// selector in string form, as upstream's scale storage does.
func ScaleOf(obj runtime.Object) (*autoscalingv1.Scale, error) {
	meta, replicas, status, selector, err := scaleParts(obj)
	if err != nil {
		return nil, err
	}
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return nil, fmt.Errorf("registry: invalid selector of %s: %w", meta.Name, err)
	}
	return &autoscalingv1.Scale{
		TypeMeta: metav1.TypeMeta{APIVersion: "autoscaling/v1", Kind: "Scale"},
		ObjectMeta: metav1.ObjectMeta{
			Name:              meta.Name,
			Namespace:         meta.Namespace,
			UID:               meta.UID,
			ResourceVersion:   meta.ResourceVersion,
			CreationTimestamp: meta.CreationTimestamp,
		},
		Spec:   autoscalingv1.ScaleSpec{Replicas: replicas},
		Status: autoscalingv1.ScaleStatus{Replicas: status, Selector: sel.String()},
	}, nil
}

func scaleParts(obj runtime.Object) (metav1.ObjectMeta, int32, int32, *metav1.LabelSelector, error) {
	var replicas int32
	switch o := obj.(type) {
	case *appsv1.Deployment:
		if o.Spec.Replicas != nil {
			replicas = *o.Spec.Replicas
		}
		return o.ObjectMeta, replicas, o.Status.Replicas, o.Spec.Selector, nil
	case *appsv1.ReplicaSet:
		if o.Spec.Replicas != nil {
			replicas = *o.Spec.Replicas
		}
		return o.ObjectMeta, replicas, o.Status.Replicas, o.Spec.Selector, nil
	case *appsv1.StatefulSet:
		return o.ObjectMeta, ptr.Deref(o.Spec.Replicas, 0), o.Status.Replicas, o.Spec.Selector, nil
	case *corev1.ReplicationController:
		// The selector is a plain label map: every label must match.
		return o.ObjectMeta, ptr.Deref(o.Spec.Replicas, 0), o.Status.Replicas, &metav1.LabelSelector{MatchLabels: o.Spec.Selector}, nil
	}
	return metav1.ObjectMeta{}, 0, 0, nil, fmt.Errorf("registry: no scale subresource for %T", obj)
}

// ValidateScale checks a scale update: replicas must not be negative.
func ValidateScale(scale *autoscalingv1.Scale) field.ErrorList {
	return nonNegative(int64(scale.Spec.Replicas), field.NewPath("spec", "replicas"))
}

// ApplyScale sets obj's spec.replicas from scale. The caller then stores obj
// as an update of the main resource (so generation and validation follow),
// using scale's resourceVersion as the precondition when it is set.
func ApplyScale(obj runtime.Object, scale *autoscalingv1.Scale) error {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		o.Spec.Replicas = ptr.To(scale.Spec.Replicas)
	case *appsv1.ReplicaSet:
		o.Spec.Replicas = ptr.To(scale.Spec.Replicas)
	case *appsv1.StatefulSet:
		o.Spec.Replicas = ptr.To(scale.Spec.Replicas)
	case *corev1.ReplicationController:
		o.Spec.Replicas = ptr.To(scale.Spec.Replicas)
	default:
		return fmt.Errorf("registry: no scale subresource for %T", obj)
	}
	return nil
}

// ScaleAccess reads and writes the scale of a resource's objects.
type ScaleAccess struct {
	// Of returns obj's scale (autoscaling/v1 Scale).
	Of func(obj runtime.Object) (*autoscalingv1.Scale, error)
	// Apply sets obj's replicas from scale.
	Apply func(obj runtime.Object, scale *autoscalingv1.Scale) error
	// ReplicasPath is where obj keeps its replicas, for the managed fields.
	ReplicasPath []string
}

// ScaleOfResource is res's Scale.Of, or ScaleOf.
func ScaleOfResource(res *Resource, obj runtime.Object) (*autoscalingv1.Scale, error) {
	if res.Scale != nil {
		return res.Scale.Of(obj)
	}
	return ScaleOf(obj)
}

// ApplyScaleOfResource is res's Scale.Apply, or ApplyScale.
func ApplyScaleOfResource(res *Resource, obj runtime.Object, scale *autoscalingv1.Scale) error {
	if res.Scale != nil {
		return res.Scale.Apply(obj, scale)
	}
	return ApplyScale(obj, scale)
}
