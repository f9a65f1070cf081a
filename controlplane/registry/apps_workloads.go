package registry

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
)

func statefulSetResource() *Resource {
	return &Resource{
		GroupVersion:    appsv1.SchemeGroupVersion,
		Name:            "statefulsets",
		Kind:            "StatefulSet",
		ListKind:        "StatefulSetList",
		Namespaced:      true,
		ShortNames:      []string{"sts"},
		Categories:      []string{"all"},
		Verbs:           allVerbs(),
		New:             func() runtime.Object { return &appsv1.StatefulSet{} },
		NewList:         func() runtime.Object { return &appsv1.StatefulSetList{} },
		Subresources:    []string{"status", "scale"},
		TrackGeneration: true,

		PrepareForCreate: mutate(func(ss *appsv1.StatefulSet) { ss.Status = appsv1.StatefulSetStatus{} }),
		PrepareForUpdate: mutate2(func(ss, old *appsv1.StatefulSet) { ss.Status = *old.Status.DeepCopy() }),
		PrepareForStatusUpdate: mutate2(func(ss, old *appsv1.StatefulSet) {
			ss.Spec = *old.Spec.DeepCopy()
			keepMetaForStatus(&ss.ObjectMeta, &old.ObjectMeta)
		}),

		SpecChanged: changed(func(ss, old *appsv1.StatefulSet) bool { return !apiequality.Semantic.DeepEqual(ss.Spec, old.Spec) }),
		Columns:     statefulSetColumns(),
		Row:         row(statefulSetRow),
	}
}

func daemonSetResource() *Resource {
	return &Resource{
		GroupVersion:    appsv1.SchemeGroupVersion,
		Name:            "daemonsets",
		Kind:            "DaemonSet",
		ListKind:        "DaemonSetList",
		Namespaced:      true,
		ShortNames:      []string{"ds"},
		Categories:      []string{"all"},
		Verbs:           allVerbs(),
		New:             func() runtime.Object { return &appsv1.DaemonSet{} },
		NewList:         func() runtime.Object { return &appsv1.DaemonSetList{} },
		Subresources:    []string{"status"},
		TrackGeneration: true,

		PrepareForCreate: mutate(prepareDaemonSetForCreate),
		PrepareForUpdate: mutate2(prepareDaemonSetForUpdate),
		PrepareForStatusUpdate: mutate2(func(ds, old *appsv1.DaemonSet) {
			ds.Spec = *old.Spec.DeepCopy()
			keepMetaForStatus(&ds.ObjectMeta, &old.ObjectMeta)
		}),

		SpecChanged: changed(func(ds, old *appsv1.DaemonSet) bool { return !apiequality.Semantic.DeepEqual(ds.Spec, old.Spec) }),
		Columns:     daemonSetColumns(),
		Row:         row(daemonSetRow),
	}
}

// The template generation of a DaemonSet lives, in apps/v1, in the
// deprecated.daemonset.template.generation annotation (upstream's internal
// spec.templateGeneration, converted). Upstream's strategy starts it at 1
// and bumps it on every change of the pod template; users cannot set it.

func templateGeneration(ds *appsv1.DaemonSet) int64 {
	g, err := strconv.ParseInt(ds.Annotations[appsv1.DeprecatedTemplateGeneration], 10, 64)
	if err != nil {
		return 0
	}
	return g
}

func setTemplateGeneration(ds *appsv1.DaemonSet, g int64) {
	if ds.Annotations == nil {
		ds.Annotations = map[string]string{}
	}
	ds.Annotations[appsv1.DeprecatedTemplateGeneration] = strconv.FormatInt(g, 10)
}

func prepareDaemonSetForCreate(ds *appsv1.DaemonSet) {
	ds.Status = appsv1.DaemonSetStatus{}
	setTemplateGeneration(ds, max(templateGeneration(ds), 1))
}

func prepareDaemonSetForUpdate(ds, old *appsv1.DaemonSet) {
	ds.Status = *old.Status.DeepCopy()
	g := templateGeneration(old)
	if !apiequality.Semantic.DeepEqual(ds.Spec.Template, old.Spec.Template) {
		g++
	}
	setTemplateGeneration(ds, g)
}

func controllerRevisionResource() *Resource {
	return &Resource{
		GroupVersion: appsv1.SchemeGroupVersion,
		Name:         "controllerrevisions",
		Kind:         "ControllerRevision",
		ListKind:     "ControllerRevisionList",
		Namespaced:   true,
		Verbs:        allVerbs(),
		New:          func() runtime.Object { return &appsv1.ControllerRevision{} },
		NewList:      func() runtime.Object { return &appsv1.ControllerRevisionList{} },
		Columns:      controllerRevisionColumns(),
		Row:          row(controllerRevisionRow),
	}
}
