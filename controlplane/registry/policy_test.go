package registry

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/controlplane/apivalidation"
)

func newPDB() *policyv1.PodDisruptionBudget {
	two := intstr.FromInt32(2)
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "zk-pdb", Namespace: "default"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &two, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "zookeeper"}}},
	}
}

func TestPolicyAndSchedulingKinds(t *testing.T) {
	runWorkloadCases(t, []workloadCase{
		{
			resource: "poddisruptionbudgets",
			valid:    func() runtime.Object { return newPDB() },
			breakIt: func(o runtime.Object) {
				one := intstr.FromInt32(1)
				o.(*policyv1.PodDisruptionBudget).Spec.MaxUnavailable = &one
			},
			want:      []string{"FieldValueInvalid spec"},
			defaulted: func(runtime.Object) string { return "" }, // policy/v1 has no defaults
			setStatus: func(o runtime.Object) { o.(*policyv1.PodDisruptionBudget).Status.DisruptionsAllowed = 1 },
			hasStatus: func(o runtime.Object) bool { return o.(*policyv1.PodDisruptionBudget).Status.DisruptionsAllowed != 0 },
			changeSpec: func(o runtime.Object) {
				three := intstr.FromInt32(3)
				o.(*policyv1.PodDisruptionBudget).Spec.MinAvailable = &three
			},
		},
		{
			resource: "priorityclasses",
			valid: func() runtime.Object {
				return &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high-priority"}, Value: 1000000}
			},
			breakIt: func(o runtime.Object) { o.(*schedulingv1.PriorityClass).Value = 1000000001 },
			want:    []string{"FieldValueForbidden value"},
			defaulted: func(o runtime.Object) string {
				if !ptr.Equal(o.(*schedulingv1.PriorityClass).PreemptionPolicy, ptr.To(corev1.PreemptLowerPriority)) {
					return "preemptionPolicy"
				}
				return ""
			},
		},
	})
}

func TestSystemPriorityClassesValidate(t *testing.T) {
	r := resourceByName(t, "priorityclasses")
	for _, pc := range apivalidation.SystemPriorityClasses() {
		if errs := createErrors(r, pc); len(errs) > 0 {
			t.Errorf("%s: %v", pc.Name, errs.ToAggregate())
		}
	}
	wrong := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "system-node-critical"}, Value: 5}
	assertErrors(t, createErrors(r, wrong), []string{"FieldValueForbidden metadata.name"})
	// The value is immutable.
	old := apivalidation.SystemPriorityClasses()[0]
	r.Default(old)
	old.ResourceVersion = "3"
	upd := old.DeepCopy()
	upd.Value++
	assertErrors(t, r.ValidateUpdate(upd, old), []string{"FieldValueForbidden value"})
}

func TestPolicyRows(t *testing.T) {
	now := time.Date(2025, 1, 3, 13, 0, 0, 0, time.UTC)
	created := metav1.NewTime(now.Add(-49 * time.Hour))
	pdb := newPDB()
	pdb.CreationTimestamp = created
	pdb.Status.DisruptionsAllowed = 1
	want := []interface{}{"zk-pdb", "2", "N/A", int64(1), "2d1h"}
	if got := podDisruptionBudgetRow(pdb, now); !reflect.DeepEqual(got, want) {
		t.Errorf("pdb row = %v\nwant %v", got, want)
	}
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high-priority", CreationTimestamp: created},
		Value: 1000000, PreemptionPolicy: ptr.To(corev1.PreemptLowerPriority)}
	want = []interface{}{"high-priority", int64(1000000), false, "2d1h", "PreemptLowerPriority"}
	if got := priorityClassRow(pc, now); !reflect.DeepEqual(got, want) {
		t.Errorf("priorityclass row = %v\nwant %v", got, want)
	}
}
