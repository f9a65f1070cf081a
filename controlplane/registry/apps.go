package registry

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
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

		PrepareForCreate: mutate(func(d *appsv1.Deployment) { d.Status = appsv1.DeploymentStatus{} }),
		PrepareForUpdate: mutate2(func(d, old *appsv1.Deployment) { d.Status = *old.Status.DeepCopy() }),
		// Upstream's status strategy keeps only spec and labels: the
		// Deployment controller writes its revision annotation through
		// the status subresource.
		PrepareForStatusUpdate: mutate2(func(d, old *appsv1.Deployment) {
			d.Spec = *old.Spec.DeepCopy()
			annotations := d.Annotations
			keepMetaForStatus(&d.ObjectMeta, &old.ObjectMeta)
			d.Annotations = annotations
		}),

		SpecChanged: changed(func(d, old *appsv1.Deployment) bool { return !apiequality.Semantic.DeepEqual(d.Spec, old.Spec) }),
		Columns:     deploymentColumns(),
		Row:         row(deploymentRow),
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

		PrepareForCreate: mutate(func(rs *appsv1.ReplicaSet) { rs.Status = appsv1.ReplicaSetStatus{} }),
		PrepareForUpdate: mutate2(func(rs, old *appsv1.ReplicaSet) { rs.Status = *old.Status.DeepCopy() }),
		PrepareForStatusUpdate: mutate2(func(rs, old *appsv1.ReplicaSet) {
			rs.Spec = *old.Spec.DeepCopy()
			keepMetaForStatus(&rs.ObjectMeta, &old.ObjectMeta)
		}),

		SpecChanged: changed(func(rs, old *appsv1.ReplicaSet) bool { return !apiequality.Semantic.DeepEqual(rs.Spec, old.Spec) }),
		Fields: selectable(func(rs *appsv1.ReplicaSet) fields.Set {
			return fields.Set{"status.replicas": strconv.Itoa(int(rs.Status.Replicas))}
		}),
		Columns: replicaSetColumns(),
		Row:     row(replicaSetRow),
	}
}
