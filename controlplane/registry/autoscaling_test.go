package registry

import (
	"reflect"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The HPA table has upstream's cells: Kind/Name, "current/target" per
// metric (two shown, then "+ N more..."), <unset> min pods; v1 objects are
// printed through their v2 form, with upstream's 80% CPU default.
func TestHorizontalPodAutoscalerRows(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	resMetric := func(name corev1.ResourceName, target autoscalingv2.MetricTarget) autoscalingv2.MetricSpec {
		return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricSource{Name: name, Target: target}}
	}
	h := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web", CreationTimestamp: metav1.NewTime(now.Add(-3 * time.Minute))},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{Kind: "Deployment", Name: "web"},
			MaxReplicas:    10,
			Metrics: []autoscalingv2.MetricSpec{
				resMetric(corev1.ResourceCPU, autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)}),
				resMetric(corev1.ResourceMemory, autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("100Mi"))}),
				{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("1k"))}}},
			},
		},
		Status: autoscalingv2.HorizontalPodAutoscalerStatus{CurrentReplicas: 4, CurrentMetrics: []autoscalingv2.MetricStatus{
			{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{Name: corev1.ResourceCPU,
				Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr.To[int32](30)}}},
		}},
	}
	r := resourceByVersion(t, "autoscaling/v2", "horizontalpodautoscalers")
	want := []interface{}{"web", "Deployment/web", "cpu: 30%/50%, memory: <unknown>/100Mi + 1 more...", "<unset>", int64(10), int64(4), "3m"}
	if got := r.Row(h, now); !reflect.DeepEqual(got, want) {
		t.Errorf("v2 row = %#v\nwant %#v", got, want)
	}

	v1 := &autoscalingv1.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "old", CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
		Spec: autoscalingv1.HorizontalPodAutoscalerSpec{MinReplicas: ptr.To[int32](2), MaxReplicas: 3,
			ScaleTargetRef: autoscalingv1.CrossVersionObjectReference{Kind: "ReplicaSet", Name: "rs"}},
	}
	r1 := resourceByVersion(t, "autoscaling/v1", "horizontalpodautoscalers")
	want = []interface{}{"old", "ReplicaSet/rs", "cpu: <unknown>/80%", "2", int64(3), int64(0), "60m"}
	if got := r1.Row(v1, now); !reflect.DeepEqual(got, want) {
		t.Errorf("v1 row = %#v\nwant %#v", got, want)
	}
	if len(r.Columns) != len(want) || len(r1.Columns) != len(want) {
		t.Errorf("columns: %d and %d, want %d", len(r.Columns), len(r1.Columns), len(want))
	}
}
