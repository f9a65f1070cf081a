package apiserver

import (
	"context"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/controlplane/storage"
)

func TestPlanEviction(t *testing.T) {
	web := map[string]string{"app": "web"}
	running := func(ready bool) *corev1.Pod {
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Labels: web},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}}}
	}
	budget := func(name string, allowed, current, desired int32) policyv1.PodDisruptionBudget {
		return policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec:   policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: web}},
			Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed, CurrentHealthy: current, DesiredHealthy: desired}}
	}
	other := budget("other", 0, 0, 1)
	other.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}
	elsewhere := budget("elsewhere", 0, 0, 1)
	elsewhere.Namespace = "other"
	pending := running(true)
	pending.Status.Phase = corev1.PodPending
	deleting := running(true)
	deleting.DeletionTimestamp = ptr.To(metav1.Now())
	succeeded := running(false)
	succeeded.Status.Phase = corev1.PodSucceeded
	always := budget("a", 0, 0, 2)
	always.Spec.UnhealthyPodEvictionPolicy = ptr.To(policyv1.AlwaysAllow)
	tests := []struct {
		name string
		pod  *corev1.Pod
		pdbs []policyv1.PodDisruptionBudget
		kind evictionKind
		pin  bool
	}{
		{name: "pending", pod: pending, pdbs: []policyv1.PodDisruptionBudget{budget("b", 0, 1, 1)}, kind: evictIgnoreBudget, pin: true},
		{name: "being deleted", pod: deleting, pdbs: []policyv1.PodDisruptionBudget{budget("b", 0, 1, 1)}, kind: evictIgnoreBudget},
		{name: "terminal", pod: succeeded, kind: evictIgnoreBudget},
		{name: "no budget", pod: running(true), pdbs: []policyv1.PodDisruptionBudget{other, elsewhere}, kind: evictNoBudget},
		{name: "one budget", pod: running(true), pdbs: []policyv1.PodDisruptionBudget{other, budget("b", 0, 1, 1)}, kind: evictDecrement},
		{name: "two budgets", pod: running(true), pdbs: []policyv1.PodDisruptionBudget{budget("b", 1, 1, 1), budget("c", 1, 1, 1)}, kind: evictRefuse},
		{name: "unready, budget healthy", pod: running(false), pdbs: []policyv1.PodDisruptionBudget{budget("b", 0, 2, 2)}, kind: evictUnhealthy, pin: true},
		{name: "unready, budget short", pod: running(false), pdbs: []policyv1.PodDisruptionBudget{budget("b", 0, 1, 2)}, kind: evictDecrement},
		{name: "unready, always allow", pod: running(false), pdbs: []policyv1.PodDisruptionBudget{always}, kind: evictUnhealthy, pin: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := planEviction(tt.pod, tt.pdbs)
			if got.kind != tt.kind || got.pin != tt.pin {
				t.Fatalf("plan = %+v, want kind %d pin %v", got, tt.kind, tt.pin)
			}
			if tt.kind == evictRefuse && (got.err == nil || got.err.(apierrors.APIStatus).Status().Code != 500) {
				t.Fatalf("two budgets: %v, want 500", got.err)
			}
		})
	}
}

func TestDecrementPDB(t *testing.T) {
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: 2},
		Status: policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 2, DisruptionsAllowed: 1, CurrentHealthy: 3, DesiredHealthy: 2}}
	next, err := decrementPDB(pdb, "p", metav1.Now().Time, false)
	if err != nil || next.Status.DisruptionsAllowed != 0 || len(next.Status.DisruptedPods) != 1 || pdb.Status.DisruptionsAllowed != 1 {
		t.Fatalf("decrement: %+v, %v", next, err)
	}
	if _, err := decrementPDB(next, "q", metav1.Now().Time, false); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("second decrement: %v, want 429", err)
	}
	stale := pdb.DeepCopy()
	stale.Status.ObservedGeneration = 1
	if _, err := decrementPDB(stale, "p", metav1.Now().Time, false); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("unobserved generation: %v, want 429", err)
	}
	negative := pdb.DeepCopy()
	negative.Status.DisruptionsAllowed = -1
	if _, err := decrementPDB(negative, "p", metav1.Now().Time, false); !apierrors.IsForbidden(err) {
		t.Fatalf("negative budget: %v, want 403", err)
	}
}

// setBudget writes a budget's status by hand, as the disruption controller would.
func setBudget(t *testing.T, cs kubernetes.Interface, name string, allowed, current, desired int32) {
	t.Helper()
	ctx := context.Background()
	pdb, err := cs.PolicyV1().PodDisruptionBudgets("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, DisruptionsAllowed: allowed,
		CurrentHealthy: current, DesiredHealthy: desired, ExpectedPods: current}
	if _, err := cs.PolicyV1().PodDisruptionBudgets("default").UpdateStatus(ctx, pdb, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("set budget status: %v", err)
	}
}

// runningPod creates a pod bound to node-1 and makes it Running and Ready.
func runningPod(t *testing.T, cs kubernetes.Interface, name string, labels map[string]string) {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	pod, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if _, err := cs.CoreV1().Pods("default").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Through the API server with client-go: an eviction the budget allows
// deletes the pod and takes a disruption; one it does not is refused with
// 429 naming the budget.
func TestEvictionSubresource(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	ctx := context.Background()
	cs := env.clientset(t)
	web := map[string]string{"app": "web"}
	runningPod(t, cs, "web-1", web)
	runningPod(t, cs, "web-2", web)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: web}}}
	if _, err := cs.PolicyV1().PodDisruptionBudgets("default").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setBudget(t, cs, "web", 1, 2, 1)
	evict := func(name string) error {
		return cs.PolicyV1().Evictions("default").Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}})
	}
	if err := evict("web-1"); err != nil {
		t.Fatalf("evict web-1: %v", err)
	}
	if _, err := cs.CoreV1().Pods("default").Get(ctx, "web-1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("web-1 after eviction: %v, want not found", err)
	}
	got, err := cs.PolicyV1().PodDisruptionBudgets("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil || got.Status.DisruptionsAllowed != 0 || got.Status.DisruptedPods["web-1"].Time.IsZero() {
		t.Fatalf("budget after eviction: %+v, %v", got.Status, err)
	}
	setBudget(t, cs, "web", 0, 1, 1)
	err = evict("web-2")
	status, ok := err.(apierrors.APIStatus)
	if !apierrors.IsTooManyRequests(err) || !ok || len(status.Status().Details.Causes) != 1 ||
		status.Status().Details.Causes[0].Message != "The disruption budget web needs 1 healthy pods and has 1 currently" ||
		status.Status().Message != "Cannot evict pod as it would violate the pod's disruption budget." {
		t.Fatalf("evict web-2: %v, want 429 naming the budget", err)
	}
	if _, err := cs.CoreV1().Pods("default").Get(ctx, "web-2", metav1.GetOptions{}); err != nil {
		t.Fatalf("web-2 after a refused eviction: %v", err)
	}
	second := pdb.DeepCopy()
	second.Name = "web-too"
	if _, err := cs.PolicyV1().PodDisruptionBudgets("default").Create(ctx, second, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := evict("web-2"); err == nil || err.(apierrors.APIStatus).Status().Code != http.StatusInternalServerError {
		t.Fatalf("two budgets: %v, want 500", err)
	}
	// A pending pod goes whatever the budgets say.
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-3", Labels: web},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pending, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := evict("web-3"); err != nil {
		t.Fatalf("evict a pending pod: %v", err)
	}
	testEvictionDiscovery(t, cs)
}

// kubectl drain looks for pods/eviction in discovery, policy/v1 Eviction.
func testEvictionDiscovery(t *testing.T, cs kubernetes.Interface) {
	list, err := cs.Discovery().ServerResourcesForGroupVersion("v1")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range list.APIResources {
		if r.Name == "pods/eviction" {
			if r.Group != "policy" || r.Version != "v1" || r.Kind != "Eviction" || len(r.Verbs) != 1 || r.Verbs[0] != "create" {
				t.Fatalf("pods/eviction in discovery: %+v", r)
			}
			return
		}
	}
	t.Fatal("no pods/eviction in discovery")
}
