package scheduler_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/controlplane/controlplanetest"
	"github.com/nodelet/nodelet/controlplane/scheduler"
)

// Two full nodes: node-a runs two low-priority pods, node-b one that a
// budget protects. A high-priority pod fits nowhere; the scheduler
// preempts on node-a (no budget broken, though more victims), nominates
// it, and binds the pod there once the victims are gone.
func TestPreemptionThroughAPI(t *testing.T) {
	srv := controlplanetest.Start(t, controlplanetest.Options{Admission: controlplanetest.AdmissionWith("Priority")})
	cs := srv.Clientset(t)
	ctx := context.Background()
	for name, value := range map[string]int32{"low": 10, "high": 1000} {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
		if _, err := cs.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "guarded", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}}}
	if _, err := cs.PolicyV1().PodDisruptionBudgets("default").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createNodes(t, cs, testNode("node-a", "1", "2Gi"), testNode("node-b", "1", "2Gi"))
	low := func(name, cpu, node, app string) *corev1.Pod {
		p := testPod(name, cpu, "")
		p.Labels["app"] = app
		p.Spec.NodeName, p.Spec.PriorityClassName = node, "low"
		return p
	}
	createPods(t, cs, low("low-a1", "400m", "node-a", "web"), low("low-a2", "400m", "node-a", "web"),
		low("guarded-b", "800m", "node-b", "guarded"))
	startScheduler(t, cs, nil)
	high := testPod("high", "700m", "")
	high.Spec.PriorityClassName = "high"
	createPods(t, cs, high)

	for _, name := range []string{"low-a1", "low-a2"} {
		v := waitPod(t, cs, name, "preemption", func(p *corev1.Pod) bool { return p.DeletionTimestamp != nil })
		if !hasDisruptionTarget(v) {
			t.Errorf("%s: no DisruptionTarget condition: %+v", name, v.Status.Conditions)
		}
	}
	p := waitPod(t, cs, "high", "nomination", func(p *corev1.Pod) bool { return p.Status.NominatedNodeName != "" })
	if p.Status.NominatedNodeName != "node-a" {
		t.Fatalf("nominated to %s, want node-a", p.Status.NominatedNodeName)
	}
	waitEvent(t, cs, "low-a1", "Preempted", "Preempted by pod "+string(p.UID)+" on node node-a")
	// A lower-priority newcomer (a controller's replacement, say) may not
	// take the room made for high.
	newcomer := low("low-new", "400m", "", "web")
	createPods(t, cs, newcomer)
	waitPod(t, cs, "low-new", "PodScheduled=False", unschedulableWith("Insufficient cpu"))
	// Play the node: the victims' containers stopped, they go for good.
	// Once one is gone the newcomer would fit on node-a but for high.
	gone := func(name string) {
		if err := cs.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
	}
	gone("low-a1")
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "low-new", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.NodeName != "" {
			t.Fatalf("low-new took the room made for high on %s", p.Spec.NodeName)
		}
	}
	gone("low-a2")
	if got := waitPod(t, cs, "high", "binding", bound); got.Spec.NodeName != "node-a" {
		t.Fatalf("high bound to %s, want node-a", got.Spec.NodeName)
	}
	waitPod(t, cs, "low-new", "PodScheduled=False", unschedulableWith("Insufficient cpu"))
	if g, err := cs.CoreV1().Pods("default").Get(ctx, "guarded-b", metav1.GetOptions{}); err != nil || g.DeletionTimestamp != nil {
		t.Fatalf("guarded-b: %v, %v", g, err)
	}
}

func hasDisruptionTarget(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == scheduler.ReasonPreemptionByScheduler {
			return true
		}
	}
	return false
}
