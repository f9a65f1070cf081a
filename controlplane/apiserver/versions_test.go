package apiserver

import (
	"context"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/controlplane/storage"
)

func newHPAv2(name string) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](2),
			MaxReplicas:    5,
			Metrics: []autoscalingv2.MetricSpec{
				{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
					Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)}}},
				{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
					Name: corev1.ResourceMemory, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("100Mi"))}}},
			},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](60)},
			},
		},
	}
}

func hasResourceMetric(metrics []autoscalingv2.MetricSpec, name corev1.ResourceName) bool {
	for _, m := range metrics {
		if m.Resource != nil && m.Resource.Name == name {
			return true
		}
	}
	return false
}

// One HorizontalPodAutoscaler, served as autoscaling/v2 (stored) and v1:
// each version reads the other's writes, v1 updates keep what only v2 can
// express, the v1 defaults and validation apply to v1 requests, and a v1
// watch sees v2 writes as v1 objects.
func TestHorizontalPodAutoscalerVersions(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	ctx := context.Background()
	cs := env.clientset(t)
	v1c, v2c := cs.AutoscalingV1().HorizontalPodAutoscalers("default"), cs.AutoscalingV2().HorizontalPodAutoscalers("default")

	created, err := v2c.Create(ctx, newHPAv2("web"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create v2: %v", err)
	}
	if created.Generation != 1 {
		t.Errorf("generation on create = %d, want 1", created.Generation)
	}
	old, err := v1c.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get v1: %v", err)
	}
	if ptr.Deref(old.Spec.TargetCPUUtilizationPercentage, 0) != 50 ||
		ptr.Deref(old.Spec.MinReplicas, 0) != 2 || old.Spec.MaxReplicas != 5 || old.ResourceVersion != created.ResourceVersion {
		t.Fatalf("v1 view (created at %s) = %+v", created.ResourceVersion, old)
	}

	w, err := v1c.Watch(ctx, metav1.ListOptions{ResourceVersion: old.ResourceVersion})
	if err != nil {
		t.Fatalf("watch v1: %v", err)
	}
	defer w.Stop()

	old.Spec.MaxReplicas = 7
	if _, err := v1c.Update(ctx, old, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update v1: %v", err)
	}
	got, err := v2c.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get v2: %v", err)
	}
	// (upstream's v1 conversion puts the metrics kept in annotations first)
	if got.Spec.MaxReplicas != 7 || !hasResourceMetric(got.Spec.Metrics, corev1.ResourceMemory) ||
		!hasResourceMetric(got.Spec.Metrics, corev1.ResourceCPU) || len(got.Spec.Metrics) != 2 || got.Spec.Behavior == nil ||
		ptr.Deref(got.Spec.Behavior.ScaleDown.StabilizationWindowSeconds, 0) != 60 || got.Generation != 2 {
		t.Fatalf("v2 after a v1 update: generation %d, spec %+v", got.Generation, got.Spec)
	}
	select {
	case ev := <-w.ResultChan():
		h, ok := ev.Object.(*autoscalingv1.HorizontalPodAutoscaler)
		if ev.Type != watch.Modified || !ok || h.Spec.MaxReplicas != 7 || h.ResourceVersion != got.ResourceVersion {
			t.Fatalf("v1 watch event %s %#v", ev.Type, ev.Object)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no v1 watch event for the update")
	}

	// A v1 object without a CPU target is read back through v2 with
	// upstream's default (80% CPU); v1's validation refuses maxReplicas 0.
	bare := &autoscalingv1.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "bare"},
		Spec: autoscalingv1.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}, MaxReplicas: 3}}
	if _, err := v1c.Create(ctx, bare, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create v1: %v", err)
	}
	b2, err := v2c.Get(ctx, "bare", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get v2 of a v1 object: %v", err)
	}
	if ptr.Deref(b2.Spec.MinReplicas, 0) != 1 || len(b2.Spec.Metrics) != 1 || b2.Spec.Metrics[0].Resource == nil ||
		ptr.Deref(b2.Spec.Metrics[0].Resource.Target.AverageUtilization, 0) != 80 {
		t.Errorf("v2 view of a v1 object without target: %+v", b2.Spec)
	}
	bad := bare.DeepCopy()
	bad.Name, bad.Spec.MaxReplicas = "bad", 0
	if _, err := v1c.Create(ctx, bad, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("v1 with maxReplicas 0: %v, want 422", err)
	}

	// The status subresource keeps the spec, in either version.
	got.Status.CurrentReplicas, got.Status.DesiredReplicas = 3, 4
	got.Spec.MaxReplicas = 99
	st, err := v2c.UpdateStatus(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status v2: %v", err)
	}
	if st.Spec.MaxReplicas != 7 || st.Status.DesiredReplicas != 4 {
		t.Errorf("status update: maxReplicas %d, desired %d", st.Spec.MaxReplicas, st.Status.DesiredReplicas)
	}
	if v1s, err := v1c.Get(ctx, "web", metav1.GetOptions{}); err != nil || v1s.Status.CurrentReplicas != 3 || v1s.Status.DesiredReplicas != 4 {
		t.Errorf("v1 status after a v2 status update: %+v, %v", v1s, err)
	}

	// One object, listed in either version.
	l1, err := v1c.List(ctx, metav1.ListOptions{})
	if err != nil || len(l1.Items) != 2 {
		t.Fatalf("list v1: %v, %v", l1, err)
	}
	if err := v1c.Delete(ctx, "bare", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete v1: %v", err)
	}
	if _, err := v2c.Get(ctx, "bare", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("v2 get after a v1 delete: %v", err)
	}

	groups, err := cs.Discovery().ServerGroups()
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	for _, g := range groups.Groups {
		if g.Name == "autoscaling" && (g.PreferredVersion.Version != "v2" || len(g.Versions) != 2 || g.Versions[1].Version != "v1") {
			t.Errorf("autoscaling discovery: %+v", g)
		}
	}
}

// Events are served as core/v1 and events.k8s.io/v1, one set of objects:
// each group reads the other's writes with upstream's field mapping,
// events.k8s.io gets its stricter validation and its own field selectors,
// and watchers of both groups open at once each get their own type.
func TestEventsVersions(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	ctx := context.Background()
	cs := env.clientset(t)
	core, ev1 := cs.CoreV1().Events("default"), cs.EventsV1().Events("default")

	wCore, err := core.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("watch core: %v", err)
	}
	defer wCore.Stop()
	wEv, err := ev1.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("watch events.k8s.io: %v", err)
	}
	defer wEv.Stop()

	now := metav1.NowMicro()
	e := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "web.1"}, EventTime: now,
		ReportingController: "example.com/ctl", ReportingInstance: "ctl-1", Action: "Scale", Reason: "Scaled",
		Regarding: corev1.ObjectReference{Kind: "Deployment", Namespace: "default", Name: "web", APIVersion: "apps/v1"},
		Note:      "scaled to 3", Type: corev1.EventTypeNormal,
	}
	if _, err := ev1.Create(ctx, e, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create events.k8s.io: %v", err)
	}
	c, err := core.Get(ctx, "web.1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get core: %v", err)
	}
	if c.Message != "scaled to 3" || c.InvolvedObject.Name != "web" || c.ReportingController != "example.com/ctl" || c.Reason != "Scaled" {
		t.Errorf("core view: %+v", c)
	}
	for name, w := range map[string]watch.Interface{"core": wCore, "events.k8s.io": wEv} {
		select {
		case got := <-w.ResultChan():
			_, isCore := got.Object.(*corev1.Event)
			_, isEv := got.Object.(*eventsv1.Event)
			if got.Type != watch.Added || (name == "core" && !isCore) || (name != "core" && !isEv) {
				t.Errorf("%s watch: %s %T", name, got.Type, got.Object)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s watch: no event", name)
		}
	}

	legacy := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "pod.1"}, Reason: "Started", Message: "started container",
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-0"},
		Source:         corev1.EventSource{Component: "kubelet"}, Count: 2, Type: corev1.EventTypeNormal,
		FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now()}
	if _, err := core.Create(ctx, legacy, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create core: %v", err)
	}
	n, err := ev1.Get(ctx, "pod.1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get events.k8s.io: %v", err)
	}
	if n.Note != "started container" || n.Regarding.Name != "web-0" || n.DeprecatedCount != 2 || n.DeprecatedSource.Component != "kubelet" {
		t.Errorf("events.k8s.io view: %+v", n)
	}
	sel, err := ev1.List(ctx, metav1.ListOptions{FieldSelector: "regarding.kind=Pod"})
	if err != nil || len(sel.Items) != 1 || sel.Items[0].Name != "pod.1" {
		t.Errorf("events.k8s.io list by regarding.kind: %v, %v", sel, err)
	}

	// events.k8s.io requires eventTime and the reporting fields; core does not.
	strict := e.DeepCopy()
	strict.Name, strict.EventTime = "bad", metav1.MicroTime{}
	if _, err := ev1.Create(ctx, strict, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("events.k8s.io without eventTime: %v, want 422", err)
	}
}
