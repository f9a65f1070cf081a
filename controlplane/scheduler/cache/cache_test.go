package cache

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/controlplane/scheduler/framework"
)

func testNode(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}}
}

func testPod(name, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: "uid-" + "name"},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}
}

func requested(c *Cache, node string) int64 {
	if n := c.NodeInfo(node); n != nil {
		return n.Requested.MilliCPU
	}
	return -1
}

func TestAssumeConfirmForget(t *testing.T) {
	c := New()
	c.AddNode(testNode("a"))
	var snap Snapshot
	c.UpdateSnapshot(&snap)
	before := snap.Nodes[0]

	pending := testPod("p", "")
	if err := c.AssumePod(framework.NewPodInfo(pending), "a"); err != nil {
		t.Fatal(err)
	}
	if !c.IsAssumed("ns/p") || requested(c, "a") != 1000 {
		t.Fatalf("assume: assumed %v requested %d", c.IsAssumed("ns/p"), requested(c, "a"))
	}
	if before.Requested.MilliCPU != 0 {
		t.Fatal("a published NodeInfo was modified")
	}
	c.UpdateSnapshot(&snap)
	if snap.Nodes[0].Requested.MilliCPU != 1000 {
		t.Fatal("snapshot not refreshed")
	}
	if err := c.AssumePod(framework.NewPodInfo(pending), "a"); err == nil {
		t.Fatal("assumed twice")
	}
	c.ForgetPod("ns/p")
	if c.IsAssumed("ns/p") || requested(c, "a") != 0 {
		t.Fatal("forget left the pod")
	}

	// Assume, then the informer reports it bound: confirmed, counted once.
	c.AssumePod(framework.NewPodInfo(pending), "a")
	c.AddPod(testPod("p", "a"))
	if c.IsAssumed("ns/p") || requested(c, "a") != 1000 {
		t.Fatalf("confirm: assumed %v requested %d", c.IsAssumed("ns/p"), requested(c, "a"))
	}
	c.ForgetPod("ns/p") // a late failure report must not drop a bound pod
	if requested(c, "a") != 1000 {
		t.Fatal("forget removed a confirmed pod")
	}
	// Bound elsewhere than assumed: moved.
	c.AssumePod(framework.NewPodInfo(testPod("q", "")), "a")
	c.AddNode(testNode("b"))
	c.AddPod(testPod("q", "b"))
	if requested(c, "a") != 1000 || requested(c, "b") != 1000 {
		t.Fatalf("moved pod: a %d b %d", requested(c, "a"), requested(c, "b"))
	}
	// Finished pods release resources.
	done := testPod("p", "a")
	done.Status.Phase = corev1.PodSucceeded
	c.AddPod(done)
	if requested(c, "a") != 0 {
		t.Fatal("succeeded pod still counted")
	}
}

func TestNodeRemovalKeepsPodsUntilRemoved(t *testing.T) {
	c := New()
	c.AddNode(testNode("a"))
	c.AddNode(testNode("b"))
	c.AddPod(testPod("p", "a"))
	c.RemoveNode("a")
	var snap Snapshot
	c.UpdateSnapshot(&snap)
	if len(snap.Nodes) != 1 || snap.Nodes[0].Name() != "b" {
		t.Fatalf("snapshot after removal: %d nodes", len(snap.Nodes))
	}
	if c.NodeInfo("a") == nil {
		t.Fatal("placeholder for the removed node's pods dropped")
	}
	c.RemovePod(testPod("p", "a"))
	if c.NodeInfo("a") != nil {
		t.Fatal("placeholder kept after its last pod left")
	}
	// A pod bound to an unknown node, then the node appears.
	c.AddPod(testPod("r", "c"))
	c.AddNode(testNode("c"))
	c.UpdateSnapshot(&snap)
	if len(snap.Nodes) != 2 || requested(c, "c") != 1000 {
		t.Fatalf("late node: %d nodes, requested %d", len(snap.Nodes), requested(c, "c"))
	}
}
