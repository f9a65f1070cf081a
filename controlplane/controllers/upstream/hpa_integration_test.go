package upstream

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/controlplane/controlplanetest"
	"github.com/nodelet/nodelet/test/testkit"
)

// podCPU is a metrics.k8s.io source for the test: every running pod uses
// the same CPU, which the test changes.
type podCPU struct {
	cs    kubernetes.Interface
	milli atomic.Int64
}

func (m *podCPU) NodeMetrics(context.Context) ([]metricsv1beta1.NodeMetrics, error) { return nil, nil }

func (m *podCPU) PodMetrics(ctx context.Context, namespace string) ([]metricsv1beta1.PodMetrics, error) {
	pods, err := m.cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	var out []metricsv1beta1.PodMetrics
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		out = append(out, metricsv1beta1.PodMetrics{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: p.Labels},
			Timestamp:  metav1.Now(), Window: metav1.Duration{Duration: time.Second},
			Containers: []metricsv1beta1.ContainerMetrics{{Name: "c", Usage: corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewMilliQuantity(m.milli.Load(), resource.DecimalSI),
				corev1.ResourceMemory: resource.MustParse("10Mi")}}},
		})
	}
	return out, nil
}

// The autoscaler, upstream's, on the API server's metrics.k8s.io: a
// ReplicationController whose pods use five times their CPU request is
// scaled up to maxReplicas (50% target), with the status, the Targets
// column's metric and a SuccessfulRescale event; when the usage drops it
// is scaled back to minReplicas once the downscale stabilisation window
// has passed.
func TestHorizontalPodAutoscaler(t *testing.T) {
	metrics := &podCPU{}
	metrics.milli.Store(500)
	cs := startWith(t, controlplanetest.Options{Metrics: metrics},
		Config{HPASyncPeriod: time.Second, HPADownscaleStabilization: 3 * time.Second})
	metrics.cs = cs
	ctx := t.Context()

	tmpl := podTemplate("hot")
	tmpl.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	rc := &corev1.ReplicationController{
		ObjectMeta: metav1.ObjectMeta{Name: "hot", Namespace: "default"},
		Spec: corev1.ReplicationControllerSpec{Replicas: ptr.To[int32](1), Selector: map[string]string{"app": "hot"},
			Template: &tmpl},
	}
	if _, err := cs.CoreV1().ReplicationControllers("default").Create(ctx, rc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create rc: %v", err)
	}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "hot", Namespace: "default"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "v1", Kind: "ReplicationController", Name: "hot"},
			MinReplicas:    ptr.To[int32](1), MaxReplicas: 4,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType,
				Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)}}}},
		},
	}
	if _, err := cs.AutoscalingV2().HorizontalPodAutoscalers("default").Create(ctx, hpa, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create hpa: %v", err)
	}

	waitReplicas(t, cs, 4, "scale up")
	testkit.Eventually(t, 30*time.Second, "hpa status after scaling up", func(ctx context.Context) (bool, error) {
		h, err := cs.AutoscalingV2().HorizontalPodAutoscalers("default").Get(ctx, "hot", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return h.Status.DesiredReplicas == 4 && h.Status.LastScaleTime != nil && len(h.Status.CurrentMetrics) == 1 &&
			h.Status.CurrentMetrics[0].Resource != nil &&
			ptr.Deref(h.Status.CurrentMetrics[0].Resource.Current.AverageUtilization, 0) == 500, nil
	})
	testkit.Eventually(t, 30*time.Second, "SuccessfulRescale event", func(ctx context.Context) (bool, error) {
		evs, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=hot,reason=SuccessfulRescale"})
		return err == nil && len(evs.Items) > 0, err
	})

	metrics.milli.Store(5)
	waitReplicas(t, cs, 1, "scale down")
}

// waitReplicas marks the controller's new pods Running and Ready (playing
// the nodelet) until the ReplicationController wants n replicas and has n
// running pods.
func waitReplicas(t *testing.T, cs kubernetes.Interface, n int32, what string) {
	t.Helper()
	testkit.Eventually(t, 60*time.Second, what, func(ctx context.Context) (bool, error) {
		rc, err := cs.CoreV1().ReplicationControllers("default").Get(ctx, "hot", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pods, err := podsOf(ctx, cs, "hot")
		if err != nil {
			return false, err
		}
		running := int32(0)
		for i := range pods {
			if pods[i].DeletionTimestamp != nil {
				continue
			}
			if pods[i].Status.Phase != corev1.PodRunning {
				setStatus(t, cs, &pods[i], corev1.PodRunning)
			}
			running++
		}
		return ptr.Deref(rc.Spec.Replicas, 0) == n && running == n, nil
	})
}
