package crds

import (
	"fmt"
	"math"
	"strings"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodelet/nodelet/controlplane/registry"
)

// The scale subresource of custom resources, as upstream's customresource
// ScaleREST: spec and status replicas and the selector read from the
// paths the CRD names, replicas written to the spec path.

func splitPath(p string) []string { return strings.Split(strings.TrimPrefix(p, "."), ".") }

func scaleAccess(sc *apiextensionsv1.CustomResourceSubresourceScale) *registry.ScaleAccess {
	return &registry.ScaleAccess{
		Of:           func(obj runtime.Object) (*autoscalingv1.Scale, error) { return scaleOf(obj, sc) },
		Apply:        func(obj runtime.Object, scale *autoscalingv1.Scale) error { return applyScale(obj, scale, sc) },
		ReplicasPath: splitPath(sc.SpecReplicasPath),
	}
}

// scaleOf is upstream's scaleFromCustomResource: missing replicas are 0.
func scaleOf(obj runtime.Object, sc *apiextensionsv1.CustomResourceSubresourceScale) (*autoscalingv1.Scale, error) {
	u := obj.(*unstructured.Unstructured)
	spec, _, err := unstructured.NestedInt64(u.Object, splitPath(sc.SpecReplicasPath)...)
	if err != nil {
		return nil, fmt.Errorf("scale of %s: %w", u.GetName(), err)
	}
	status, _, err := unstructured.NestedInt64(u.Object, splitPath(sc.StatusReplicasPath)...)
	if err != nil {
		return nil, fmt.Errorf("scale of %s: %w", u.GetName(), err)
	}
	var selector string
	if sc.LabelSelectorPath != nil && *sc.LabelSelectorPath != "" {
		if selector, _, err = unstructured.NestedString(u.Object, splitPath(*sc.LabelSelectorPath)...); err != nil {
			return nil, fmt.Errorf("scale of %s: %w", u.GetName(), err)
		}
	}
	return &autoscalingv1.Scale{
		TypeMeta: metav1.TypeMeta{APIVersion: "autoscaling/v1", Kind: "Scale"},
		ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), Namespace: u.GetNamespace(), UID: u.GetUID(),
			ResourceVersion: u.GetResourceVersion(), CreationTimestamp: u.GetCreationTimestamp()},
		Spec:   autoscalingv1.ScaleSpec{Replicas: int32(spec)},
		Status: autoscalingv1.ScaleStatus{Replicas: int32(status), Selector: selector},
	}, nil
}

func applyScale(obj runtime.Object, scale *autoscalingv1.Scale, sc *apiextensionsv1.CustomResourceSubresourceScale) error {
	u := obj.(*unstructured.Unstructured)
	if err := unstructured.SetNestedField(u.Object, int64(scale.Spec.Replicas), splitPath(sc.SpecReplicasPath)...); err != nil {
		return fmt.Errorf("scale %s: %w", u.GetName(), err)
	}
	return nil
}

// validateScale is upstream's customResourceValidator.ValidateScaleSpec
// and ValidateScaleStatus (status only for a status update).
func validateScale(u *unstructured.Unstructured, sc *apiextensionsv1.CustomResourceSubresourceScale, spec bool) field.ErrorList {
	if sc == nil {
		return nil
	}
	var errs field.ErrorList
	replicas := func(path string) {
		v, _, err := unstructured.NestedInt64(u.Object, splitPath(path)...)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(field.NewPath(path), v, err.Error()))
		case v < 0:
			errs = append(errs, field.Invalid(field.NewPath(path), v, "should be a non-negative integer"))
		case v > math.MaxInt32:
			errs = append(errs, field.Invalid(field.NewPath(path), v, fmt.Sprintf("should be less than or equal to %v", math.MaxInt32)))
		}
	}
	if spec {
		replicas(sc.SpecReplicasPath)
	}
	replicas(sc.StatusReplicasPath)
	if sc.LabelSelectorPath != nil {
		if v, _, err := unstructured.NestedString(u.Object, splitPath(*sc.LabelSelectorPath)...); err != nil {
			errs = append(errs, field.Invalid(field.NewPath(*sc.LabelSelectorPath), v, err.Error()))
		}
	}
	return errs
}
