package registry

import (
	"time"

	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func podDisruptionBudgetResource() *Resource {
	return &Resource{
		GroupVersion:    policyv1.SchemeGroupVersion,
		Name:            "poddisruptionbudgets",
		Kind:            "PodDisruptionBudget",
		ListKind:        "PodDisruptionBudgetList",
		Namespaced:      true,
		ShortNames:      []string{"pdb"},
		Verbs:           allVerbs(),
		New:             func() runtime.Object { return &policyv1.PodDisruptionBudget{} },
		NewList:         func() runtime.Object { return &policyv1.PodDisruptionBudgetList{} },
		Subresources:    []string{"status"},
		TrackGeneration: true,

		PrepareForCreate: mutate(func(pdb *policyv1.PodDisruptionBudget) { pdb.Status = policyv1.PodDisruptionBudgetStatus{} }),
		PrepareForUpdate: mutate2(func(pdb, old *policyv1.PodDisruptionBudget) { pdb.Status = *old.Status.DeepCopy() }),
		PrepareForStatusUpdate: mutate2(func(pdb, old *policyv1.PodDisruptionBudget) {
			pdb.Spec = *old.Spec.DeepCopy()
			keepMetaForStatus(&pdb.ObjectMeta, &old.ObjectMeta)
		}),

		SpecChanged: changed(func(pdb, old *policyv1.PodDisruptionBudget) bool {
			return !apiequality.Semantic.DeepEqual(pdb.Spec, old.Spec)
		}),
		Columns: podDisruptionBudgetColumns(),
		Row:     row(podDisruptionBudgetRow),
	}
}

// priorityClassResource serves PriorityClasses: cluster-scoped, with a
// generation of 1 that upstream's strategy never bumps.
func priorityClassResource() *Resource {
	return &Resource{
		GroupVersion:    schedulingv1.SchemeGroupVersion,
		Name:            "priorityclasses",
		Kind:            "PriorityClass",
		ListKind:        "PriorityClassList",
		ShortNames:      []string{"pc"},
		Verbs:           allVerbs(),
		New:             func() runtime.Object { return &schedulingv1.PriorityClass{} },
		NewList:         func() runtime.Object { return &schedulingv1.PriorityClassList{} },
		TrackGeneration: true,
		SpecChanged:     func(obj, old runtime.Object) bool { return false },
		Columns:         priorityClassColumns(),
		Row:             row(priorityClassRow),
	}
}

func podDisruptionBudgetColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Min Available", Type: "string", Description: "The minimum number of pods that must be available."},
		{Name: "Max Unavailable", Type: "string", Description: "The maximum number of pods that may be unavailable."},
		{Name: "Allowed Disruptions", Type: "integer", Description: "Calculated number of pods that may be disrupted at this time."},
		ageColumn(),
	}
}

func podDisruptionBudgetRow(pdb *policyv1.PodDisruptionBudget, now time.Time) []interface{} {
	minAvailable, maxUnavailable := "N/A", "N/A"
	if pdb.Spec.MinAvailable != nil {
		minAvailable = pdb.Spec.MinAvailable.String()
	}
	if pdb.Spec.MaxUnavailable != nil {
		maxUnavailable = pdb.Spec.MaxUnavailable.String()
	}
	return []interface{}{pdb.Name, minAvailable, maxUnavailable, int64(pdb.Status.DisruptionsAllowed), age(pdb.CreationTimestamp, now)}
}

func priorityClassColumns() []metav1.TableColumnDefinition {
	doc := schedulingv1.PriorityClass{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Value", Type: "integer", Description: doc["value"]},
		{Name: "Global-Default", Type: "boolean", Description: doc["globalDefault"]},
		ageColumn(),
		{Name: "PreemptionPolicy", Type: "string", Description: doc["preemptionPolicy"]},
	}
}

func priorityClassRow(pc *schedulingv1.PriorityClass, now time.Time) []interface{} {
	var policy string
	if pc.PreemptionPolicy != nil {
		policy = string(*pc.PreemptionPolicy)
	}
	return []interface{}{pc.Name, int64(pc.Value), pc.GlobalDefault, age(pc.CreationTimestamp, now), policy}
}
