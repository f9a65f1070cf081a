package nodelet

// Node-side admission, as upstream's kubelet does it: before a new pod
// gets a worker, the scheduler's own resource and host-port filters run
// against the node's allocatable and the pods already admitted. A pod
// that does not fit is set Failed with upstream's reasons (OutOfcpu,
// OutOfmemory, OutOfephemeral-storage, OutOfpods, NodePorts) and never
// started: a scheduler with a stale view, or a pod with spec.nodeName set
// by hand, cannot overcommit the node.

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/controlplane/scheduler/framework"
	"github.com/nodelet/nodelet/controlplane/scheduler/plugins"
)

// admit returns why pod cannot run next to admitted on a node with the
// given allocatable; empty reason admits it.
func admit(allocatable corev1.ResourceList, admitted []*corev1.Pod, pod *corev1.Pod) (reason, message string) {
	node := &corev1.Node{Status: corev1.NodeStatus{Allocatable: allocatable}}
	infos := make([]*framework.PodInfo, 0, len(admitted))
	for _, p := range admitted {
		infos = append(infos, framework.NewPodInfo(p))
	}
	ni := framework.NewNodeInfo(node, infos...)
	pi := framework.NewPodInfo(pod)
	if fails := plugins.NodeResourcesFit(pi, ni); len(fails) > 0 {
		switch fails[0] {
		case plugins.ReasonTooManyPods:
			return "OutOfpods", "Pod was rejected: Node didn't have enough resource: pods"
		case plugins.ReasonInsufficientCPU:
			return "OutOfcpu", "Pod was rejected: Node didn't have enough resource: cpu"
		case plugins.ReasonInsufficientMemory:
			return "OutOfmemory", "Pod was rejected: Node didn't have enough resource: memory"
		case plugins.ReasonInsufficientStorage:
			return "OutOfephemeral-storage", "Pod was rejected: Node didn't have enough resource: ephemeral-storage"
		}
		return "UnexpectedAdmissionError", "Pod was rejected: " + fails[0]
	}
	if fails := plugins.NodePorts(pi, ni); len(fails) > 0 {
		return "NodePorts", fmt.Sprintf("Pod was rejected: Predicate NodePorts failed: %s", fails[0])
	}
	return "", ""
}
