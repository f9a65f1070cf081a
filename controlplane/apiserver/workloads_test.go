package apiserver

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/controlplane/storage"
)

// The start-up creates upstream's two system priority classes; a second
// start leaves them alone, and no user class may take a system- name.
func TestSystemPriorityClasses(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	ctx := context.Background()
	cs := env.clientset(t)
	list, err := cs.SchedulingV1().PriorityClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list priority classes: %v", err)
	}
	want := map[string]int32{"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}
	if len(list.Items) != len(want) {
		t.Fatalf("priority classes = %v", list.Items)
	}
	for _, pc := range list.Items {
		if want[pc.Name] != pc.Value || pc.Generation != 1 || pc.Description == "" {
			t.Errorf("priority class %s: value %d, generation %d", pc.Name, pc.Value, pc.Generation)
		}
	}
	if err := env.srv.EnsureDefaults(ctx); err != nil {
		t.Fatalf("EnsureDefaults again: %v", err)
	}
	// As upstream, a system class cannot be deleted.
	err = cs.SchedulingV1().PriorityClasses().Delete(ctx, "system-node-critical", metav1.DeleteOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("delete system-node-critical: %v, want 403", err)
	}
	if _, err := cs.SchedulingV1().PriorityClasses().Get(ctx, "system-node-critical", metav1.GetOptions{}); err != nil {
		t.Errorf("system-node-critical after the refused delete: %v", err)
	}
	bad := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "system-mine"}, Value: 10}
	_, err = cs.SchedulingV1().PriorityClasses().Create(ctx, bad, metav1.CreateOptions{})
	if status, ok := err.(apierrors.APIStatus); !ok || status.Status().Code != 422 ||
		len(status.Status().Details.Causes) == 0 || status.Status().Details.Causes[0].Field != "metadata.name" {
		t.Fatalf("a system- priority class: %v, want 422 on metadata.name", err)
	}
}

// statefulsets/scale reads and writes spec.replicas as an autoscaling/v1
// Scale, bumping the generation like any spec change.
func TestStatefulSetScale(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	ctx := context.Background()
	cs := env.clientset(t)
	labels := map[string]string{"app": "web"}
	ss := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.StatefulSetSpec{ServiceName: "nginx", Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx"}}}}},
		Status: appsv1.StatefulSetStatus{Replicas: 9},
	}
	created, err := cs.AppsV1().StatefulSets("default").Create(ctx, ss, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if created.Status.Replicas != 0 || created.Generation != 1 || *created.Spec.Replicas != 1 {
		t.Fatalf("created: status %+v, generation %d, replicas %d", created.Status, created.Generation, *created.Spec.Replicas)
	}
	sc, err := cs.AppsV1().StatefulSets("default").GetScale(ctx, "web", metav1.GetOptions{})
	if err != nil || sc.Spec.Replicas != 1 || sc.Status.Selector != "app=web" {
		t.Fatalf("get scale: %+v, %v", sc, err)
	}
	want := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Spec: autoscalingv1.ScaleSpec{Replicas: 3}}
	if _, err := cs.AppsV1().StatefulSets("default").UpdateScale(ctx, "web", want, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update scale: %v", err)
	}
	got, err := cs.AppsV1().StatefulSets("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil || *got.Spec.Replicas != 3 || got.Generation != 2 {
		t.Fatalf("after scale: %v, %v", got, err)
	}
}
