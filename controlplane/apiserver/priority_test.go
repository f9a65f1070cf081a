package apiserver

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/controlplane/storage"
)

func priorityClass(name string, value int32, def bool, policy corev1.PreemptionPolicy) *schedulingv1.PriorityClass {
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value, GlobalDefault: def}
	if policy != "" {
		pc.PreemptionPolicy = &policy
	}
	return pc
}

func TestAdmitPodPriority(t *testing.T) {
	high := priorityClass("high", 1000, false, corev1.PreemptNever)
	def := priorityClass("def", 10, true, corev1.PreemptLowerPriority)
	def2 := priorityClass("def2", 5, true, "")
	never, lower := corev1.PreemptNever, corev1.PreemptLowerPriority
	tests := []struct {
		name      string
		className string
		priority  *int32
		policy    *corev1.PreemptionPolicy
		classes   []*schedulingv1.PriorityClass
		wantClass string
		want      int32
		wantPol   *corev1.PreemptionPolicy
		wantErr   string
	}{
		{name: "no class, no default", want: 0, wantPol: &lower},
		{name: "named", className: "high", classes: []*schedulingv1.PriorityClass{high, def}, wantClass: "high", want: 1000, wantPol: &never},
		{name: "global default", classes: []*schedulingv1.PriorityClass{high, def}, wantClass: "def", want: 10, wantPol: &lower},
		{name: "lowest of two defaults", classes: []*schedulingv1.PriorityClass{def, def2}, wantClass: "def2", want: 5},
		{name: "unknown", className: "nope", classes: []*schedulingv1.PriorityClass{high}, wantErr: "no PriorityClass with name nope was found"},
		{name: "same priority given", className: "high", priority: ptr.To[int32](1000), classes: []*schedulingv1.PriorityClass{high}, wantClass: "high", want: 1000, wantPol: &never},
		{name: "other priority given", className: "high", priority: ptr.To[int32](7), classes: []*schedulingv1.PriorityClass{high},
			wantErr: "the integer value of priority (7) must not be provided in pod spec; priority admission controller computed 1000"},
		{name: "other policy given", className: "high", policy: &lower, classes: []*schedulingv1.PriorityClass{high},
			wantErr: "the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided in pod spec"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
				Spec: corev1.PodSpec{PriorityClassName: tt.className, Priority: tt.priority, PreemptionPolicy: tt.policy}}
			err := admitPodPriority(pod, tt.classes)
			if tt.wantErr != "" {
				if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want 403 with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if pod.Spec.PriorityClassName != tt.wantClass || *pod.Spec.Priority != tt.want {
				t.Errorf("class %q priority %d, want %q %d", pod.Spec.PriorityClassName, *pod.Spec.Priority, tt.wantClass, tt.want)
			}
			if (tt.wantPol == nil) != (pod.Spec.PreemptionPolicy == nil) || (tt.wantPol != nil && *tt.wantPol != *pod.Spec.PreemptionPolicy) {
				t.Errorf("policy %v, want %v", pod.Spec.PreemptionPolicy, tt.wantPol)
			}
		})
	}
}

func TestCheckGlobalDefault(t *testing.T) {
	def := priorityClass("def", 10, true, "")
	other := priorityClass("other", 1, false, "")
	tests := []struct {
		name    string
		pc      *schedulingv1.PriorityClass
		classes []*schedulingv1.PriorityClass
		create  bool
		wantErr bool
	}{
		{name: "first default", pc: priorityClass("new", 1, true, ""), classes: []*schedulingv1.PriorityClass{other}, create: true},
		{name: "second default on create", pc: priorityClass("new", 1, true, ""), classes: []*schedulingv1.PriorityClass{def}, create: true, wantErr: true},
		{name: "not default", pc: priorityClass("new", 1, false, ""), classes: []*schedulingv1.PriorityClass{def}, create: true},
		{name: "default updated", pc: priorityClass("def", 10, true, ""), classes: []*schedulingv1.PriorityClass{def}},
		{name: "other made default", pc: priorityClass("other", 1, true, ""), classes: []*schedulingv1.PriorityClass{def, other}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkGlobalDefault(tt.pc, tt.classes, tt.create)
			if tt.wantErr != (err != nil) || (err != nil && !apierrors.IsForbidden(err)) {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
		})
	}
}

// Through the API server: pods get their class's priority, an unknown
// class is refused, and only one class may be the global default.
func TestPriorityAdmission(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	ctx := context.Background()
	cs := env.clientset(t)
	pcs := cs.SchedulingV1().PriorityClasses()
	pods := cs.CoreV1().Pods("default")
	newPod := func(name, class string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{PriorityClassName: class, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	}
	p, err := pods.Create(ctx, newPod("plain", ""), metav1.CreateOptions{})
	if err != nil || *p.Spec.Priority != 0 || *p.Spec.PreemptionPolicy != corev1.PreemptLowerPriority {
		t.Fatalf("pod without class: %v, %v", p, err)
	}
	p, err = pods.Create(ctx, newPod("critical", "system-node-critical"), metav1.CreateOptions{})
	if err != nil || *p.Spec.Priority != 2000001000 {
		t.Fatalf("system-node-critical pod: %v, %v", p, err)
	}
	_, err = pods.Create(ctx, newPod("lost", "nope"), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "no PriorityClass with name nope was found") {
		t.Fatalf("unknown class: %v, want 403", err)
	}
	bad := newPod("bad", "")
	bad.Spec.Priority = ptr.To[int32](5)
	if _, err = pods.Create(ctx, bad, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("pod setting its own priority: %v, want 403", err)
	}
	if _, err := pcs.Create(ctx, priorityClass("low", 100, true, ""), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create default class: %v", err)
	}
	_, err = pcs.Create(ctx, priorityClass("low2", 50, true, ""), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "PriorityClass low is already marked as default") {
		t.Fatalf("second default: %v, want 403", err)
	}
	p, err = pods.Create(ctx, newPod("defaulted", ""), metav1.CreateOptions{})
	if err != nil || p.Spec.PriorityClassName != "low" || *p.Spec.Priority != 100 {
		t.Fatalf("pod under the default class: %v, %v", p, err)
	}
	// An update that leaves the priority out keeps it.
	p.Spec.Priority, p.Spec.PreemptionPolicy = nil, nil
	p.Labels = map[string]string{"a": "b"}
	if p, err = pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil || *p.Spec.Priority != 100 {
		t.Fatalf("update without priority: %v, %v", p, err)
	}
	other, err := pcs.Create(ctx, priorityClass("other", 1, false, ""), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other.GlobalDefault = true
	if _, err := pcs.Update(ctx, other, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("make a second class default: %v, want 403", err)
	}
}
