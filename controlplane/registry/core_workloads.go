package registry

import (
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

func replicationControllerResource() *Resource {
	return &Resource{
		GroupVersion:    corev1.SchemeGroupVersion,
		Name:            "replicationcontrollers",
		Kind:            "ReplicationController",
		ListKind:        "ReplicationControllerList",
		Namespaced:      true,
		ShortNames:      []string{"rc"},
		Categories:      []string{"all"},
		Verbs:           allVerbs(),
		New:             func() runtime.Object { return &corev1.ReplicationController{} },
		NewList:         func() runtime.Object { return &corev1.ReplicationControllerList{} },
		Subresources:    []string{"status", "scale"},
		TrackGeneration: true,

		PrepareForCreate: mutate(func(rc *corev1.ReplicationController) { rc.Status = corev1.ReplicationControllerStatus{} }),
		PrepareForUpdate: mutate2(func(rc, old *corev1.ReplicationController) { rc.Status = *old.Status.DeepCopy() }),
		PrepareForStatusUpdate: mutate2(func(rc, old *corev1.ReplicationController) {
			rc.Spec = *old.Spec.DeepCopy()
			keepMetaForStatus(&rc.ObjectMeta, &old.ObjectMeta)
		}),

		SpecChanged: changed(func(rc, old *corev1.ReplicationController) bool {
			return !apiequality.Semantic.DeepEqual(rc.Spec, old.Spec)
		}),
		Fields: selectable(func(rc *corev1.ReplicationController) fields.Set {
			return fields.Set{"status.replicas": strconv.Itoa(int(rc.Status.Replicas))}
		}),
		Columns: replicationControllerColumns(),
		Row:     row(replicationControllerRow),
	}
}

// podTemplateResource serves PodTemplates; upstream bumps their generation
// when the template changes.
func podTemplateResource() *Resource {
	return &Resource{
		GroupVersion:    corev1.SchemeGroupVersion,
		Name:            "podtemplates",
		Kind:            "PodTemplate",
		ListKind:        "PodTemplateList",
		Namespaced:      true,
		Verbs:           allVerbs(),
		New:             func() runtime.Object { return &corev1.PodTemplate{} },
		NewList:         func() runtime.Object { return &corev1.PodTemplateList{} },
		TrackGeneration: true,

		SpecChanged: changed(func(pt, old *corev1.PodTemplate) bool {
			return !apiequality.Semantic.DeepEqual(pt.Template, old.Template)
		}),
		Columns: podTemplateColumns(),
		Row:     row(podTemplateRow),
	}
}

func replicationControllerColumns() []metav1.TableColumnDefinition {
	spec, status := corev1.ReplicationControllerSpec{}.SwaggerDoc(), corev1.ReplicationControllerStatus{}.SwaggerDoc()
	return append([]metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Desired", Type: "integer", Description: spec["replicas"]},
		{Name: "Current", Type: "integer", Description: status["replicas"]},
		{Name: "Ready", Type: "integer", Description: status["readyReplicas"]},
		ageColumn(),
	}, templateColumns(spec["selector"])...)
}

func replicationControllerRow(rc *corev1.ReplicationController, now time.Time) []interface{} {
	var containers []corev1.Container
	if rc.Spec.Template != nil {
		containers = rc.Spec.Template.Spec.Containers
	}
	names, images := containerCells(containers)
	return []interface{}{
		rc.Name, int64(ptr.Deref(rc.Spec.Replicas, 0)), int64(rc.Status.Replicas), int64(rc.Status.ReadyReplicas),
		age(rc.CreationTimestamp, now), names, images, labels.FormatLabels(rc.Spec.Selector),
	}
}

func podTemplateColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Containers", Type: "string", Description: "Names of each container in the template."},
		{Name: "Images", Type: "string", Description: "Images referenced by each container in the template."},
		{Name: "Pod Labels", Type: "string", Description: "The labels for the pod template."},
	}
}

func podTemplateRow(pt *corev1.PodTemplate, _ time.Time) []interface{} {
	names, images := containerCells(pt.Template.Spec.Containers)
	return []interface{}{pt.Name, names, images, labels.FormatLabels(pt.Template.Labels)}
}
