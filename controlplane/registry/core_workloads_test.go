package registry

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

func newReplicationController() *corev1.ReplicationController {
	tmpl := webTemplate()
	return &corev1.ReplicationController{
		ObjectMeta: metav1.ObjectMeta{Name: "nginx", Namespace: "default"},
		Spec:       corev1.ReplicationControllerSpec{Selector: map[string]string{"app": "web"}, Template: &tmpl},
	}
}

func TestCoreWorkloads(t *testing.T) {
	runWorkloadCases(t, []workloadCase{
		{
			resource: "replicationcontrollers",
			valid:    func() runtime.Object { return newReplicationController() },
			breakIt: func(o runtime.Object) {
				rc := o.(*corev1.ReplicationController)
				rc.Spec.Replicas = ptr.To(int32(-2))
				rc.Spec.Template.Spec.Containers[0].Image = ""
			},
			want: []string{"FieldValueInvalid spec.replicas", "FieldValueRequired spec.template.spec.containers[0].image"},
			defaulted: func(o runtime.Object) string {
				rc := o.(*corev1.ReplicationController)
				if ptr.Deref(rc.Spec.Replicas, 0) != 1 || rc.Spec.Template.Spec.DNSPolicy != corev1.DNSClusterFirst {
					return "replicas or the pod template's defaults"
				}
				return ""
			},
			setStatus:  func(o runtime.Object) { o.(*corev1.ReplicationController).Status.Replicas = 2 },
			hasStatus:  func(o runtime.Object) bool { return o.(*corev1.ReplicationController).Status.Replicas != 0 },
			changeSpec: func(o runtime.Object) { o.(*corev1.ReplicationController).Spec.Replicas = ptr.To(int32(3)) },
		},
		{
			resource: "podtemplates",
			valid: func() runtime.Object {
				return &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Template: webTemplate()}
			},
			breakIt: func(o runtime.Object) { o.(*corev1.PodTemplate).Template.Spec.Containers[0].Name = "App" },
			want:    []string{"FieldValueInvalid template.spec.containers[0].name"},
			defaulted: func(o runtime.Object) string {
				if o.(*corev1.PodTemplate).Template.Spec.RestartPolicy != corev1.RestartPolicyAlways {
					return "the pod template's restartPolicy"
				}
				return ""
			},
		},
	})
}

func TestPodTemplateGeneration(t *testing.T) {
	r := resourceByName(t, "podtemplates")
	old := &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Template: webTemplate()}
	labelled := old.DeepCopy()
	labelled.Labels = map[string]string{"a": "b"}
	if r.SpecChanged(labelled, old) {
		t.Errorf("a label change bumps the generation")
	}
	changed := old.DeepCopy()
	changed.Template.Spec.Containers[0].Image = "nginx:2"
	if !r.SpecChanged(changed, old) {
		t.Errorf("a template change does not bump the generation")
	}
}

func TestCoreWorkloadRows(t *testing.T) {
	now := time.Date(2025, 1, 3, 13, 0, 0, 0, time.UTC)
	rc := newReplicationController()
	rc.CreationTimestamp = metav1.NewTime(now.Add(-49 * time.Hour))
	rc.Spec.Replicas = ptr.To(int32(3))
	rc.Status = corev1.ReplicationControllerStatus{Replicas: 3, ReadyReplicas: 1}
	want := []interface{}{"nginx", int64(3), int64(3), int64(1), "2d1h", "app", "nginx", "app=web"}
	if got := replicationControllerRow(rc, now); !reflect.DeepEqual(got, want) {
		t.Errorf("rc row = %v\nwant %v", got, want)
	}
	pt := &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Template: webTemplate()}
	want = []interface{}{"web", "app", "nginx", "app=web"}
	if got := podTemplateRow(pt, now); !reflect.DeepEqual(got, want) {
		t.Errorf("podtemplate row = %v\nwant %v", got, want)
	}
	if got := resourceByName(t, "replicationcontrollers").Fields(rc); got["status.replicas"] != "3" {
		t.Errorf("rc fields = %v", got)
	}
}
