package registry

import (
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

func webTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{ctr("app", "nginx")}},
	}
}

func webSelector() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
}

func newStatefulSet() *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec:       appsv1.StatefulSetSpec{ServiceName: "nginx", Selector: webSelector(), Template: webTemplate()},
	}
}

func newDaemonSet() *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "default"},
		Spec:       appsv1.DaemonSetSpec{Selector: webSelector(), Template: webTemplate()},
	}
}

func TestAppsWorkloads(t *testing.T) {
	runWorkloadCases(t, []workloadCase{
		{
			resource: "statefulsets",
			valid:    func() runtime.Object { return newStatefulSet() },
			breakIt: func(o runtime.Object) {
				ss := o.(*appsv1.StatefulSet)
				ss.Spec.Replicas = ptr.To(int32(-1))
				ss.Spec.Template.Labels = map[string]string{"app": "other"}
			},
			want: []string{"FieldValueInvalid spec.replicas", "FieldValueInvalid spec.template.metadata.labels"},
			defaulted: func(o runtime.Object) string {
				s := o.(*appsv1.StatefulSet).Spec
				if ptr.Deref(s.Replicas, 0) != 1 || s.PodManagementPolicy != appsv1.OrderedReadyPodManagement ||
					s.UpdateStrategy.Type != appsv1.RollingUpdateStatefulSetStrategyType || ptr.Deref(s.RevisionHistoryLimit, 0) != 10 ||
					s.PersistentVolumeClaimRetentionPolicy == nil || s.Template.Spec.RestartPolicy != corev1.RestartPolicyAlways {
					return "replicas, podManagementPolicy, updateStrategy, revisionHistoryLimit, retention policy or the pod defaults"
				}
				return ""
			},
			setStatus:  func(o runtime.Object) { o.(*appsv1.StatefulSet).Status.Replicas = 2 },
			hasStatus:  func(o runtime.Object) bool { return o.(*appsv1.StatefulSet).Status.Replicas != 0 },
			changeSpec: func(o runtime.Object) { o.(*appsv1.StatefulSet).Spec.Replicas = ptr.To(int32(3)) },
		},
		{
			resource: "daemonsets",
			valid:    func() runtime.Object { return newDaemonSet() },
			breakIt: func(o runtime.Object) {
				o.(*appsv1.DaemonSet).Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
			},
			want: []string{"FieldValueNotSupported spec.template.spec.restartPolicy"},
			defaulted: func(o runtime.Object) string {
				s := o.(*appsv1.DaemonSet).Spec
				if s.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType || s.UpdateStrategy.RollingUpdate == nil ||
					s.UpdateStrategy.RollingUpdate.MaxUnavailable.IntValue() != 1 || ptr.Deref(s.RevisionHistoryLimit, 0) != 10 {
					return "updateStrategy or revisionHistoryLimit"
				}
				return ""
			},
			setStatus:  func(o runtime.Object) { o.(*appsv1.DaemonSet).Status.NumberReady = 2 },
			hasStatus:  func(o runtime.Object) bool { return o.(*appsv1.DaemonSet).Status.NumberReady != 0 },
			changeSpec: func(o runtime.Object) { o.(*appsv1.DaemonSet).Spec.Template.Spec.Containers[0].Image = "nginx:2" },
		},
		{
			resource: "controllerrevisions",
			valid: func() runtime.Object {
				return &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "default"},
					Data: runtime.RawExtension{Raw: []byte(`{"spec":{}}`)}, Revision: 1}
			},
			breakIt:   func(o runtime.Object) { o.(*appsv1.ControllerRevision).Revision = -1 },
			want:      []string{"FieldValueInvalid revision"},
			defaulted: func(runtime.Object) string { return "" },
		},
	})
}

func TestDaemonSetTemplateGeneration(t *testing.T) {
	r := resourceByName(t, "daemonsets")
	ds := newDaemonSet()
	r.Default(ds)
	r.PrepareForCreate(ds)
	ds.ResourceVersion = "7"
	if g := ds.Annotations[appsv1.DeprecatedTemplateGeneration]; g != "1" {
		t.Fatalf("template generation after create = %q, want 1", g)
	}
	labelled := ds.DeepCopy()
	labelled.Labels = map[string]string{"tier": "node"}
	labelled.Annotations[appsv1.DeprecatedTemplateGeneration] = "7" // users cannot set it
	r.PrepareForUpdate(labelled, ds)
	if g := labelled.Annotations[appsv1.DeprecatedTemplateGeneration]; g != "1" {
		t.Errorf("template generation after a metadata change = %q, want 1", g)
	}
	changed := ds.DeepCopy()
	changed.Spec.Template.Spec.Containers[0].Image = "nginx:2"
	r.PrepareForUpdate(changed, ds)
	if g := changed.Annotations[appsv1.DeprecatedTemplateGeneration]; g != "2" {
		t.Errorf("template generation after a template change = %q, want 2", g)
	}
	if errs := r.ValidateUpdate(changed, ds); len(errs) > 0 {
		t.Errorf("update: %v", errs.ToAggregate())
	}
}

func TestAppsWorkloadRows(t *testing.T) {
	now := time.Date(2025, 1, 3, 13, 0, 0, 0, time.UTC)
	created := metav1.NewTime(now.Add(-49 * time.Hour))
	ss := newStatefulSet()
	ss.CreationTimestamp = created
	ss.Spec.Replicas = ptr.To(int32(3))
	ss.Status.ReadyReplicas = 2
	want := []interface{}{"web", "2/3", "2d1h", "app", "nginx"}
	if got := statefulSetRow(ss, now); !reflect.DeepEqual(got, want) {
		t.Errorf("statefulset row = %v\nwant %v", got, want)
	}

	ds := newDaemonSet()
	ds.CreationTimestamp = created
	ds.Spec.Template.Spec.NodeSelector = map[string]string{"kubernetes.io/os": "linux"}
	ds.Status = appsv1.DaemonSetStatus{DesiredNumberScheduled: 3, CurrentNumberScheduled: 3, NumberReady: 2, UpdatedNumberScheduled: 3, NumberAvailable: 2}
	want = []interface{}{"agent", int64(3), int64(3), int64(2), int64(3), int64(2), "kubernetes.io/os=linux", "2d1h", "app", "nginx", "app=web"}
	if got := daemonSetRow(ds, now); !reflect.DeepEqual(got, want) {
		t.Errorf("daemonset row = %v\nwant %v", got, want)
	}

	cr := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "web-7d9f", CreationTimestamp: created,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", Controller: ptr.To(true)}}}, Revision: 2}
	want = []interface{}{"web-7d9f", "statefulset.apps/web", int64(2), "2d1h"}
	if got := controllerRevisionRow(cr, now); !reflect.DeepEqual(got, want) {
		t.Errorf("controllerrevision row = %v\nwant %v", got, want)
	}
	cr.OwnerReferences = nil
	if got := controllerRevisionRow(cr, now)[1]; got != "<none>" {
		t.Errorf("controller cell without owner = %v", got)
	}
}
