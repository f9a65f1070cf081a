package admissionplugins_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Upstream's RuntimeClass plugin through the API server: a pod of a
// class gets its overhead, nodeSelector and tolerations; a pod of a
// missing class, or with an overhead of its own, is refused in
// upstream's words.
func TestRuntimeClassAdmission(t *testing.T) {
	cs := start(t)
	ctx := context.Background()
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	overhead := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("16Mi")}
	toleration := corev1.Toleration{Key: "sandboxed", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "sandboxed"}, Handler: "runc-alt",
		Overhead:   &nodev1.Overhead{PodFixed: overhead},
		Scheduling: &nodev1.Scheduling{NodeSelector: map[string]string{"sandbox": "yes"}, Tolerations: []corev1.Toleration{toleration}}}
	if _, err := cs.NodeV1().RuntimeClasses().Create(ctx, rc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create RuntimeClass: %v", err)
	}
	pods := cs.CoreV1().Pods("default")
	newPod := func(name, class string, mutate func(*corev1.Pod)) *corev1.Pod {
		return pod(name, func(p *corev1.Pod) {
			p.Spec.AutomountServiceAccountToken = ptr.To(false)
			if class != "" {
				p.Spec.RuntimeClassName = ptr.To(class)
			}
			if mutate != nil {
				mutate(p)
			}
		})
	}

	p, err := pods.Create(ctx, newPod("classy", "sandboxed", func(p *corev1.Pod) {
		p.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	}), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("pod of the class: %v", err)
	}
	if !reflect.DeepEqual(p.Spec.Overhead, overhead) {
		t.Errorf("overhead = %v, want %v", p.Spec.Overhead, overhead)
	}
	if want := map[string]string{"disk": "ssd", "sandbox": "yes"}; !reflect.DeepEqual(p.Spec.NodeSelector, want) {
		t.Errorf("nodeSelector = %v, want %v", p.Spec.NodeSelector, want)
	}
	found := false
	for _, tol := range p.Spec.Tolerations {
		found = found || tol.MatchToleration(&toleration)
	}
	if !found {
		t.Errorf("tolerations %v lack the class's %v", p.Spec.Tolerations, toleration)
	}

	for _, tc := range []struct {
		name, class string
		mutate      func(*corev1.Pod)
		want        string
	}{
		{"lost", "missing", nil, `pod rejected: RuntimeClass "missing" not found`},
		{"own-overhead", "sandboxed", func(p *corev1.Pod) {
			p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		},
			"pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"},
		{"classless-overhead", "", func(p *corev1.Pod) { p.Spec.Overhead = overhead },
			"pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead"},
		{"conflict", "sandboxed", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"sandbox": "no"} },
			"conflict: runtimeClass.scheduling.nodeSelector[sandbox] = yes; pod.spec.nodeSelector[sandbox] = no"},
	} {
		_, err := pods.Create(ctx, newPod(tc.name, tc.class, tc.mutate), metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want 403 %q", tc.name, err, tc.want)
		}
	}
}
