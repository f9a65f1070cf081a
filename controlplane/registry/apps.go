package registry

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func deploymentResource() *Resource {
	return &Resource{
		GroupVersion:    appsv1.SchemeGroupVersion,
		Name:            "deployments",
		Kind:            "Deployment",
		ListKind:        "DeploymentList",
		Namespaced:      true,
		ShortNames:      []string{"deploy"},
		Categories:      []string{"all"},
		Verbs:           allVerbs(),
		New:             func() runtime.Object { return &appsv1.Deployment{} },
		NewList:         func() runtime.Object { return &appsv1.DeploymentList{} },
		Subresources:    []string{"status", "scale"},
		TrackGeneration: true,

		Default:          mutate(defaultDeployment),
		PrepareForCreate: mutate(func(d *appsv1.Deployment) { d.Status = appsv1.DeploymentStatus{} }),
		PrepareForUpdate: mutate2(func(d, old *appsv1.Deployment) { d.Status = *old.Status.DeepCopy() }),
		PrepareForStatusUpdate: mutate2(func(d, old *appsv1.Deployment) {
			d.Spec = *old.Spec.DeepCopy()
			keepMetaForStatus(&d.ObjectMeta, &old.ObjectMeta)
		}),
		Validate:             validate(validateDeployment),
		ValidateUpdate:       validate2(validateDeploymentUpdate),
		ValidateStatusUpdate: validate2(validateDeploymentStatusUpdate),
		SpecChanged:          changed(func(d, old *appsv1.Deployment) bool { return !apiequality.Semantic.DeepEqual(d.Spec, old.Spec) }),
		Columns:              deploymentColumns(),
		Row:                  row(deploymentRow),
	}
}

func replicaSetResource() *Resource {
	return &Resource{
		GroupVersion:    appsv1.SchemeGroupVersion,
		Name:            "replicasets",
		Kind:            "ReplicaSet",
		ListKind:        "ReplicaSetList",
		Namespaced:      true,
		ShortNames:      []string{"rs"},
		Categories:      []string{"all"},
		Verbs:           allVerbs(),
		New:             func() runtime.Object { return &appsv1.ReplicaSet{} },
		NewList:         func() runtime.Object { return &appsv1.ReplicaSetList{} },
		Subresources:    []string{"status", "scale"},
		TrackGeneration: true,

		Default:          mutate(defaultReplicaSet),
		PrepareForCreate: mutate(func(rs *appsv1.ReplicaSet) { rs.Status = appsv1.ReplicaSetStatus{} }),
		PrepareForUpdate: mutate2(func(rs, old *appsv1.ReplicaSet) { rs.Status = *old.Status.DeepCopy() }),
		PrepareForStatusUpdate: mutate2(func(rs, old *appsv1.ReplicaSet) {
			rs.Spec = *old.Spec.DeepCopy()
			keepMetaForStatus(&rs.ObjectMeta, &old.ObjectMeta)
		}),
		Validate:             validate(validateReplicaSet),
		ValidateUpdate:       validate2(validateReplicaSetUpdate),
		ValidateStatusUpdate: validate2(validateReplicaSetStatusUpdate),
		SpecChanged:          changed(func(rs, old *appsv1.ReplicaSet) bool { return !apiequality.Semantic.DeepEqual(rs.Spec, old.Spec) }),
		Fields: selectable(func(rs *appsv1.ReplicaSet) fields.Set {
			return fields.Set{"status.replicas": strconv.Itoa(int(rs.Status.Replicas))}
		}),
		Columns: replicaSetColumns(),
		Row:     row(replicaSetRow),
	}
}

// defaultDeployment applies apps/v1's SetDefaults_Deployment and the pod
// template defaults. Unlike extensions/v1beta1, apps/v1 defaults neither the
// selector nor the deployment's labels from the template.
func defaultDeployment(d *appsv1.Deployment) {
	if d.Spec.Replicas == nil {
		d.Spec.Replicas = ptr.To(int32(1))
	}
	s := &d.Spec.Strategy
	if s.Type == "" {
		s.Type = appsv1.RollingUpdateDeploymentStrategyType
	}
	if s.Type == appsv1.RollingUpdateDeploymentStrategyType {
		if s.RollingUpdate == nil {
			s.RollingUpdate = &appsv1.RollingUpdateDeployment{}
		}
		if s.RollingUpdate.MaxUnavailable == nil {
			s.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromString("25%"))
		}
		if s.RollingUpdate.MaxSurge == nil {
			s.RollingUpdate.MaxSurge = ptr.To(intstr.FromString("25%"))
		}
	}
	if d.Spec.RevisionHistoryLimit == nil {
		d.Spec.RevisionHistoryLimit = ptr.To(int32(10))
	}
	if d.Spec.ProgressDeadlineSeconds == nil {
		d.Spec.ProgressDeadlineSeconds = ptr.To(int32(600))
	}
	defaultPodSpec(&d.Spec.Template.Spec)
}

func defaultReplicaSet(rs *appsv1.ReplicaSet) {
	if rs.Spec.Replicas == nil {
		rs.Spec.Replicas = ptr.To(int32(1))
	}
	defaultPodSpec(&rs.Spec.Template.Spec)
}

func validateDeployment(d *appsv1.Deployment) field.ErrorList {
	errs := validateMeta(d, true, apivalidation.NameIsDNSSubdomain)
	return append(errs, validateDeploymentSpec(&d.Spec, field.NewPath("spec"))...)
}

// validateDeploymentUpdate also keeps the selector: apps/v1 made it immutable.
func validateDeploymentUpdate(d, old *appsv1.Deployment) field.ErrorList {
	errs := validateMetaUpdate(d, old)
	errs = append(errs, validateDeploymentSpec(&d.Spec, field.NewPath("spec"))...)
	return append(errs, apivalidation.ValidateImmutableField(d.Spec.Selector, old.Spec.Selector, field.NewPath("spec", "selector"))...)
}

func validateDeploymentSpec(spec *appsv1.DeploymentSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.Replicas != nil {
		errs = append(errs, nonNegative(int64(*spec.Replicas), path.Child("replicas"))...)
	}
	errs = append(errs, validateSelectorAndTemplate(spec.Selector, &spec.Template, path)...)
	errs = append(errs, validateDeploymentStrategy(&spec.Strategy, path.Child("strategy"))...)
	errs = append(errs, nonNegative(int64(spec.MinReadySeconds), path.Child("minReadySeconds"))...)
	if spec.RevisionHistoryLimit != nil {
		errs = append(errs, nonNegative(int64(*spec.RevisionHistoryLimit), path.Child("revisionHistoryLimit"))...)
	}
	if p := spec.ProgressDeadlineSeconds; p != nil {
		errs = append(errs, nonNegative(int64(*p), path.Child("progressDeadlineSeconds"))...)
		if *p <= spec.MinReadySeconds {
			errs = append(errs, field.Invalid(path.Child("progressDeadlineSeconds"), *p, "must be greater than minReadySeconds"))
		}
	}
	return errs
}

// validateSelectorAndTemplate checks what deployments and replica sets share:
// a required, non-empty selector that matches the template's labels, and a
// template whose pods restart Always and have no deadline. (Upstream's
// replica set check says "deployment" in its message too.)
func validateSelectorAndTemplate(selector *metav1.LabelSelector, t *corev1.PodTemplateSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	selPath := path.Child("selector")
	if selector == nil {
		errs = append(errs, field.Required(selPath, ""))
	} else {
		errs = append(errs, metav1validation.ValidateLabelSelector(selector, metav1validation.LabelSelectorValidationOptions{}, selPath)...)
		if len(selector.MatchLabels)+len(selector.MatchExpressions) == 0 {
			errs = append(errs, field.Invalid(selPath, selector, "empty selector is invalid for deployment"))
		}
	}
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return append(errs, field.Invalid(selPath, selector, "invalid label selector"))
	}
	tPath := path.Child("template")
	if !sel.Empty() && !sel.Matches(labels.Set(t.Labels)) {
		errs = append(errs, field.Invalid(tPath.Child("metadata", "labels"), t.Labels, "`selector` does not match template `labels`"))
	}
	errs = append(errs, validatePodTemplate(t, tPath)...)
	if t.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(tPath.Child("spec", "restartPolicy"), t.Spec.RestartPolicy,
			[]corev1.RestartPolicy{corev1.RestartPolicyAlways}))
	}
	if t.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(tPath.Child("spec", "activeDeadlineSeconds"), "activeDeadlineSeconds in ReplicaSet is not Supported"))
	}
	return errs
}

func validateDeploymentStrategy(s *appsv1.DeploymentStrategy, path *field.Path) field.ErrorList {
	switch s.Type {
	case appsv1.RecreateDeploymentStrategyType:
		if s.RollingUpdate != nil {
			return field.ErrorList{field.Forbidden(path.Child("rollingUpdate"), "may not be specified when strategy `type` is 'Recreate'")}
		}
		return nil
	case appsv1.RollingUpdateDeploymentStrategyType:
		if s.RollingUpdate == nil {
			return field.ErrorList{field.Required(path.Child("rollingUpdate"), "this should be defaulted and never be nil")}
		}
		return validateRollingUpdate(s.RollingUpdate, path.Child("rollingUpdate"))
	}
	return field.ErrorList{field.NotSupported(path, s, []string{
		string(appsv1.RecreateDeploymentStrategyType), string(appsv1.RollingUpdateDeploymentStrategyType)})}
}

// validateRollingUpdate: maxSurge and maxUnavailable are non-negative
// integers or percentages, not both zero, maxUnavailable at most 100%.
func validateRollingUpdate(ru *appsv1.RollingUpdateDeployment, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	unavailable, surge := intstr.FromInt32(0), intstr.FromInt32(0)
	if ru.MaxUnavailable != nil {
		unavailable = *ru.MaxUnavailable
	}
	if ru.MaxSurge != nil {
		surge = *ru.MaxSurge
	}
	unavailPath := path.Child("maxUnavailable")
	errs = append(errs, validateIntOrPercent(unavailable, unavailPath)...)
	errs = append(errs, validateIntOrPercent(surge, path.Child("maxSurge"))...)
	if intOrPercentValue(unavailable) == 0 && intOrPercentValue(surge) == 0 {
		errs = append(errs, field.Invalid(unavailPath, unavailable, "may not be 0 when `maxSurge` is 0"))
	}
	if v, ok := percentValue(unavailable); ok && v > 100 {
		errs = append(errs, field.Invalid(unavailPath, unavailable, "must not be greater than 100%"))
	}
	return errs
}

func validateIntOrPercent(v intstr.IntOrString, path *field.Path) field.ErrorList {
	if v.Type == intstr.Int {
		return nonNegative(int64(v.IntValue()), path)
	}
	var errs field.ErrorList
	for _, msg := range validation.IsValidPercent(v.StrVal) {
		errs = append(errs, field.Invalid(path, v, msg))
	}
	return errs
}

func percentValue(v intstr.IntOrString) (int, bool) {
	if v.Type != intstr.String || len(validation.IsValidPercent(v.StrVal)) != 0 {
		return 0, false
	}
	n, _ := strconv.Atoi(v.StrVal[:len(v.StrVal)-1])
	return n, true
}

func intOrPercentValue(v intstr.IntOrString) int {
	if n, ok := percentValue(v); ok {
		return n
	}
	return v.IntValue()
}

func validateDeploymentStatusUpdate(d, old *appsv1.Deployment) field.ErrorList {
	errs := validateMetaUpdate(d, old)
	s, path := d.Status, field.NewPath("status")
	errs = append(errs, validateReplicaCounts(path, map[string]int32{
		"replicas": s.Replicas, "updatedReplicas": s.UpdatedReplicas, "readyReplicas": s.ReadyReplicas,
		"availableReplicas": s.AvailableReplicas, "unavailableReplicas": s.UnavailableReplicas,
	}, "updatedReplicas", "readyReplicas", "availableReplicas")...)
	errs = append(errs, nonNegative(s.ObservedGeneration, path.Child("observedGeneration"))...)
	if s.CollisionCount != nil {
		errs = append(errs, nonNegative(int64(*s.CollisionCount), path.Child("collisionCount"))...)
	}
	if s.AvailableReplicas > s.ReadyReplicas {
		errs = append(errs, field.Invalid(path.Child("availableReplicas"), s.AvailableReplicas, "cannot be greater than readyReplicas"))
	}
	return errs
}

// validateReplicaCounts requires every count to be non-negative and the named
// ones to be at most status.replicas.
func validateReplicaCounts(path *field.Path, counts map[string]int32, atMostReplicas ...string) field.ErrorList {
	var errs field.ErrorList
	for _, name := range sortedKeys(counts) {
		errs = append(errs, nonNegative(int64(counts[name]), path.Child(name))...)
	}
	for _, name := range atMostReplicas {
		if counts[name] > counts["replicas"] {
			errs = append(errs, field.Invalid(path.Child(name), counts[name], "cannot be greater than status.replicas"))
		}
	}
	return errs
}

func validateReplicaSet(rs *appsv1.ReplicaSet) field.ErrorList {
	errs := validateMeta(rs, true, apivalidation.NameIsDNSSubdomain)
	return append(errs, validateReplicaSetSpec(&rs.Spec, field.NewPath("spec"))...)
}

func validateReplicaSetUpdate(rs, old *appsv1.ReplicaSet) field.ErrorList {
	errs := validateMetaUpdate(rs, old)
	errs = append(errs, validateReplicaSetSpec(&rs.Spec, field.NewPath("spec"))...)
	return append(errs, apivalidation.ValidateImmutableField(rs.Spec.Selector, old.Spec.Selector, field.NewPath("spec", "selector"))...)
}

func validateReplicaSetSpec(spec *appsv1.ReplicaSetSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.Replicas != nil {
		errs = append(errs, nonNegative(int64(*spec.Replicas), path.Child("replicas"))...)
	}
	errs = append(errs, nonNegative(int64(spec.MinReadySeconds), path.Child("minReadySeconds"))...)
	return append(errs, validateSelectorAndTemplate(spec.Selector, &spec.Template, path)...)
}

func validateReplicaSetStatusUpdate(rs, old *appsv1.ReplicaSet) field.ErrorList {
	errs := validateMetaUpdate(rs, old)
	s, path := rs.Status, field.NewPath("status")
	errs = append(errs, validateReplicaCounts(path, map[string]int32{
		"replicas": s.Replicas, "fullyLabeledReplicas": s.FullyLabeledReplicas,
		"readyReplicas": s.ReadyReplicas, "availableReplicas": s.AvailableReplicas,
	}, "fullyLabeledReplicas", "readyReplicas", "availableReplicas")...)
	errs = append(errs, nonNegative(s.ObservedGeneration, path.Child("observedGeneration"))...)
	if s.AvailableReplicas > s.ReadyReplicas {
		errs = append(errs, field.Invalid(path.Child("availableReplicas"), s.AvailableReplicas, "cannot be greater than readyReplicas"))
	}
	return errs
}
