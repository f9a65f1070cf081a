package admissionplugins_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/test/testkit"
)

// Through the API server with the chain: pods get their class's
// priority, an unknown class is refused, and only one class may be the
// global default (upstream's Priority plugin).
func TestPriorityAdmission(t *testing.T) {
	cs := start(t)
	ctx := context.Background()
	pcs := cs.SchedulingV1().PriorityClasses()
	pods := cs.CoreV1().Pods("default")
	noToken := func(p *corev1.Pod) { p.Spec.AutomountServiceAccountToken = ptr.To(false) }
	newPod := func(name, class string) *corev1.Pod {
		return pod(name, func(p *corev1.Pod) { noToken(p); p.Spec.PriorityClassName = class })
	}
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
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
	if _, err = pods.Create(ctx, bad, metav1.CreateOptions{}); !apierrors.IsForbidden(err) ||
		!strings.Contains(err.Error(), "the integer value of priority (5) must not be provided in pod spec") {
		t.Fatalf("pod setting its own priority: %v, want 403", err)
	}
	low := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "low"}, Value: 100, GlobalDefault: true}
	if _, err := pcs.Create(ctx, low, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create default class: %v", err)
	}
	// The plugin reads classes from its informer: the new default shows
	// up there shortly after the write (and only then is a second refused).
	testkit.Eventually(t, 10*time.Second, "the new default class in the plugin's informer", func() bool {
		p, err = pods.Create(ctx, newPod("defaulted", ""), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Logf("dry run: %v", err)
		}
		return err == nil && p.Spec.PriorityClassName == "low"
	})
	low2 := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "low2"}, Value: 50, GlobalDefault: true}
	_, err = pcs.Create(ctx, low2, metav1.CreateOptions{})
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
	other, err := pcs.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "other"}, Value: 1}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other.GlobalDefault = true
	if _, err := pcs.Update(ctx, other, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("make a second class default: %v, want 403", err)
	}
}

// Upstream's NamespaceLifecycle: nothing is created in a missing or
// terminating namespace, and the system namespaces are not deleted.
func TestNamespaceLifecycle(t *testing.T) {
	cs := start(t)
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}
	_, err := cs.CoreV1().ConfigMaps("nowhere").Create(ctx, cm, metav1.CreateOptions{})
	if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), `namespaces "nowhere" not found`) {
		t.Fatalf("create in a missing namespace: %v, want 404", err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Created a moment ago: upstream looks it up live, so this works at once.
	if _, err := cs.CoreV1().ConfigMaps("doomed").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create in a new namespace: %v", err)
	}
	if err := cs.CoreV1().Namespaces().Delete(ctx, "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cm.Name = "y"
	testkit.Eventually(t, 10*time.Second, "creates refused in the terminating namespace", func() bool {
		_, err = cs.CoreV1().ConfigMaps("doomed").Create(ctx, cm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil
	})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "unable to create new content in namespace doomed because it is being terminated") {
		t.Fatalf("create in a terminating namespace: %v, want 403", err)
	}
	if !apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		t.Errorf("terminating namespace: no %s cause in %v", corev1.NamespaceTerminatingCause, err)
	}
	// Content already there may still be deleted.
	if err := cs.CoreV1().ConfigMaps("doomed").Delete(ctx, "x", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete in a terminating namespace: %v", err)
	}
	for _, ns := range []string{"default", "kube-system", "kube-public"} {
		err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "this namespace may not be deleted") {
			t.Errorf("delete namespace %s: %v, want 403", ns, err)
		}
	}
}

// Upstream's DefaultTolerationSeconds gives pods 300 s on not-ready and
// unreachable nodes unless they say otherwise; TaintNodesByCondition
// makes a new node not-ready for scheduling until its controller sees it
// ready.
func TestPodAndNodeDefaults(t *testing.T) {
	cs := start(t)
	ctx := context.Background()
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err := cs.CoreV1().Pods("default").Create(ctx, pod("t", func(p *corev1.Pod) {
		p.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists,
			Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](5)}}
	}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{corev1.TaintNodeUnreachable: 5, corev1.TaintNodeNotReady: 300}
	if len(p.Spec.Tolerations) != 2 {
		t.Fatalf("tolerations %+v, want unreachable 5 s and not-ready 300 s", p.Spec.Tolerations)
	}
	for _, tol := range p.Spec.Tolerations {
		if tol.TolerationSeconds == nil || *tol.TolerationSeconds != want[tol.Key] || tol.Effect != corev1.TaintEffectNoExecute {
			t.Errorf("toleration %+v, want %d s", tol, want[tol.Key])
		}
	}
	n, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != corev1.TaintNodeNotReady || n.Spec.Taints[0].Effect != corev1.TaintEffectNoSchedule {
		t.Errorf("new node taints %+v, want not-ready:NoSchedule", n.Spec.Taints)
	}
}
