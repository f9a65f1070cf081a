package registry

import (
	"fmt"
	"strings"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// hpaResource is what both served versions of HorizontalPodAutoscalers
// share: names, verbs, the status split and the columns.
func hpaResource(gv schema.GroupVersion, newObj, newList func() runtime.Object) *Resource {
	return &Resource{
		GroupVersion:    gv,
		Name:            "horizontalpodautoscalers",
		Kind:            "HorizontalPodAutoscaler",
		ListKind:        "HorizontalPodAutoscalerList",
		Namespaced:      true,
		ShortNames:      []string{"hpa"},
		Categories:      []string{"all"},
		Verbs:           allVerbs(),
		New:             newObj,
		NewList:         newList,
		Subresources:    []string{"status"},
		TrackGeneration: true,
		Columns:         horizontalPodAutoscalerColumns(),
	}
}

// horizontalPodAutoscalerResource serves autoscaling/v2
// HorizontalPodAutoscalers, the version upstream stores them in.
func horizontalPodAutoscalerResource() *Resource {
	r := hpaResource(autoscalingv2.SchemeGroupVersion,
		func() runtime.Object { return &autoscalingv2.HorizontalPodAutoscaler{} },
		func() runtime.Object { return &autoscalingv2.HorizontalPodAutoscalerList{} })
	r.PrepareForCreate = mutate(func(h *autoscalingv2.HorizontalPodAutoscaler) {
		h.Status = autoscalingv2.HorizontalPodAutoscalerStatus{}
	})
	r.PrepareForUpdate = mutate2(func(h, old *autoscalingv2.HorizontalPodAutoscaler) { h.Status = *old.Status.DeepCopy() })
	r.PrepareForStatusUpdate = mutate2(func(h, old *autoscalingv2.HorizontalPodAutoscaler) {
		h.Spec = *old.Spec.DeepCopy()
		keepMetaForStatus(&h.ObjectMeta, &old.ObjectMeta)
	})
	r.SpecChanged = changed(func(h, old *autoscalingv2.HorizontalPodAutoscaler) bool {
		return !apiequality.Semantic.DeepEqual(h.Spec, old.Spec)
	})
	r.Row = row(horizontalPodAutoscalerRow)
	return r
}

// horizontalPodAutoscalerV1Resource serves autoscaling/v1, stored as
// stored's (v2) objects; the metrics v1 cannot express travel in the
// annotations upstream's conversion uses.
func horizontalPodAutoscalerV1Resource(stored *Resource, convert func(in, out runtime.Object) error) *Resource {
	r := hpaResource(autoscalingv1.SchemeGroupVersion,
		func() runtime.Object { return &autoscalingv1.HorizontalPodAutoscaler{} },
		func() runtime.Object { return &autoscalingv1.HorizontalPodAutoscalerList{} })
	r.Stored, r.Convert = stored, convert
	r.PrepareForCreate = mutate(func(h *autoscalingv1.HorizontalPodAutoscaler) {
		h.Status = autoscalingv1.HorizontalPodAutoscalerStatus{}
	})
	r.PrepareForUpdate = mutate2(func(h, old *autoscalingv1.HorizontalPodAutoscaler) { h.Status = *old.Status.DeepCopy() })
	r.PrepareForStatusUpdate = mutate2(func(h, old *autoscalingv1.HorizontalPodAutoscaler) {
		h.Spec = *old.Spec.DeepCopy()
		keepMetaForStatus(&h.ObjectMeta, &old.ObjectMeta)
	})
	r.SpecChanged = changed(func(h, old *autoscalingv1.HorizontalPodAutoscaler) bool {
		return !apiequality.Semantic.DeepEqual(h.Spec, old.Spec)
	})
	r.Row = func(obj runtime.Object, now time.Time) []interface{} {
		v2 := &autoscalingv2.HorizontalPodAutoscaler{}
		if err := convert(obj, v2); err != nil {
			return failedRow(len(r.Columns), err)
		}
		return horizontalPodAutoscalerRow(v2, now)
	}
	return r
}

// failedRow is the row of an object that could not be converted for
// printing (a wiring mistake): the error in the first cell, the rest empty.
func failedRow(columns int, err error) []interface{} {
	cells := make([]interface{}, columns)
	cells[0] = "<error: " + err.Error() + ">"
	for i := 1; i < columns; i++ {
		cells[i] = ""
	}
	return cells
}

func horizontalPodAutoscalerColumns() []metav1.TableColumnDefinition {
	spec := autoscalingv2.HorizontalPodAutoscalerSpec{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Reference", Type: "string", Description: spec["scaleTargetRef"]},
		{Name: "Targets", Type: "string", Description: spec["metrics"]},
		{Name: "MinPods", Type: "string", Description: spec["minReplicas"]},
		{Name: "MaxPods", Type: "string", Description: spec["maxReplicas"]},
		{Name: "Replicas", Type: "string", Description: autoscalingv2.HorizontalPodAutoscalerStatus{}.SwaggerDoc()["currentReplicas"]},
		ageColumn(),
	}
}

func horizontalPodAutoscalerRow(h *autoscalingv2.HorizontalPodAutoscaler, now time.Time) []interface{} {
	minPods := "<unset>"
	if h.Spec.MinReplicas != nil {
		minPods = fmt.Sprint(*h.Spec.MinReplicas)
	}
	ref := h.Spec.ScaleTargetRef.Kind + "/" + h.Spec.ScaleTargetRef.Name
	return []interface{}{h.Name, ref, hpaTargets(h.Spec.Metrics, h.Status.CurrentMetrics), minPods,
		int64(h.Spec.MaxReplicas), int64(h.Status.CurrentReplicas), age(h.CreationTimestamp, now)}
}

// hpaTargets renders the Targets cell as upstream's printer does:
// "current/target" per metric, the first two shown and ", + N more...".
func hpaTargets(specs []autoscalingv2.MetricSpec, statuses []autoscalingv2.MetricStatus) string {
	if len(specs) == 0 {
		return "<none>"
	}
	var cells []string
	for i, spec := range specs {
		var st *autoscalingv2.MetricStatus
		if i < len(statuses) {
			st = &statuses[i]
		}
		cells = append(cells, hpaTarget(spec, st))
	}
	if len(cells) > 2 {
		return strings.Join(cells[:2], ", ") + fmt.Sprintf(" + %d more...", len(cells)-2)
	}
	return strings.Join(cells, ", ")
}

func hpaTarget(spec autoscalingv2.MetricSpec, st *autoscalingv2.MetricStatus) string {
	switch spec.Type {
	case autoscalingv2.ResourceMetricSourceType:
		var cur *autoscalingv2.MetricValueStatus
		if st != nil && st.Resource != nil {
			cur = &st.Resource.Current
		}
		return string(spec.Resource.Name) + ": " + metricValue(spec.Resource.Target, cur, false)
	case autoscalingv2.ContainerResourceMetricSourceType:
		var cur *autoscalingv2.MetricValueStatus
		if st != nil && st.ContainerResource != nil {
			cur = &st.ContainerResource.Current
		}
		return string(spec.ContainerResource.Name) + ": " + metricValue(spec.ContainerResource.Target, cur, false)
	case autoscalingv2.PodsMetricSourceType:
		var cur *autoscalingv2.MetricValueStatus
		if st != nil && st.Pods != nil {
			cur = &st.Pods.Current
		}
		return metricValue(spec.Pods.Target, cur, false)
	case autoscalingv2.ObjectMetricSourceType:
		var cur *autoscalingv2.MetricValueStatus
		if st != nil && st.Object != nil {
			cur = &st.Object.Current
		}
		return metricValue(spec.Object.Target, cur, true)
	case autoscalingv2.ExternalMetricSourceType:
		var cur *autoscalingv2.MetricValueStatus
		if st != nil && st.External != nil {
			cur = &st.External.Current
		}
		return metricValue(spec.External.Target, cur, true)
	}
	return "<unknown type>"
}

// metricValue is "current/target": an average value, a utilization in
// percent, or a plain value, whichever the target sets. Object and
// External metrics mark an average with " (avg)", as upstream does.
func metricValue(target autoscalingv2.MetricTarget, cur *autoscalingv2.MetricValueStatus, markAvg bool) string {
	current := "<unknown>"
	switch {
	case target.AverageValue != nil:
		if cur != nil && cur.AverageValue != nil {
			current = cur.AverageValue.String()
		}
		out := current + "/" + target.AverageValue.String()
		if markAvg {
			out += " (avg)"
		}
		return out
	case target.AverageUtilization != nil || target.Type == autoscalingv2.UtilizationMetricType:
		if cur != nil && cur.AverageUtilization != nil {
			current = fmt.Sprintf("%d%%", *cur.AverageUtilization)
		}
		want := "<auto>"
		if target.AverageUtilization != nil {
			want = fmt.Sprintf("%d%%", *target.AverageUtilization)
		}
		return current + "/" + want
	case target.Value != nil:
		if cur != nil && cur.Value != nil {
			current = cur.Value.String()
		}
		return current + "/" + target.Value.String()
	}
	return current + "/<unset>"
}
