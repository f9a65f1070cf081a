package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// fakeNode stands in for a node agent in tests of the control plane: it
// registers a Node, renews its Lease, and plays the node's part for pods
// bound to it (Running and Ready with an IP; a terminating pod is confirmed
// deleted). Containers do not exist; only the API objects do.
type fakeNode struct {
	name   string
	index  int
	cs     kubernetes.Interface
	cancel context.CancelFunc
	done   chan struct{}
}

func startFakeNode(t *testing.T, cs kubernetes.Interface, name string, index int) *fakeNode {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	n := &fakeNode{name: name, index: index, cs: cs, cancel: cancel, done: make(chan struct{})}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")},
		},
	}
	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatalf("register node %s: %v", name, err)
	}
	n.heartbeat(ctx)
	go n.loop(ctx)
	t.Cleanup(n.stop)
	return n
}

// stop ends the heartbeat and pod handling, as a node that died would.
func (n *fakeNode) stop() {
	n.cancel()
	<-n.done
}

func (n *fakeNode) loop(ctx context.Context) {
	defer close(n.done)
	beat := time.NewTicker(time.Second)
	defer beat.Stop()
	pods := time.NewTicker(200 * time.Millisecond)
	defer pods.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
			n.heartbeat(ctx)
		case <-pods.C:
			n.syncPods(ctx)
		}
	}
}

func (n *fakeNode) heartbeat(ctx context.Context) {
	now := metav1.NewMicroTime(time.Now())
	leases := n.cs.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	lease, err := leases.Get(ctx, n.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		secs := int32(40)
		leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: n.name},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &n.name, LeaseDurationSeconds: &secs, RenewTime: &now}}, metav1.CreateOptions{})
	} else if err == nil {
		lease.Spec.RenewTime = &now
		leases.Update(ctx, lease, metav1.UpdateOptions{})
	}
	node, err := n.cs.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
	if err != nil {
		return
	}
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}
	node.Status.Conditions = []corev1.NodeCondition{ready}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.200.0.%d", n.index+1)}}
	n.cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
}

func (n *fakeNode) syncPods(ctx context.Context) {
	list, err := n.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.name})
	if err != nil {
		return
	}
	for i := range list.Items {
		pod := &list.Items[i]
		if pod.DeletionTimestamp != nil {
			zero := int64(0)
			n.cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &pod.UID}})
			continue
		}
		if pod.Status.Phase == corev1.PodRunning {
			continue
		}
		now := metav1.Now()
		pod.Status.Phase = corev1.PodRunning
		pod.Status.PodIP = fmt.Sprintf("10.244.%d.%d", n.index, 2+i%250)
		pod.Status.PodIPs = []corev1.PodIP{{IP: pod.Status.PodIP}}
		pod.Status.StartTime = &now
		pod.Status.Conditions = append(pod.Status.Conditions,
			corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now})
		for _, c := range pod.Spec.Containers {
			pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
				Name: c.Name, Image: c.Image, Ready: true, Started: ptrTo(true),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}})
		}
		n.cs.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	}
}

func ptrTo[T any](v T) *T { return &v }
