package framework

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// NodeInfo is a node with the pods on it (bound and assumed) and their
// aggregates. The cache treats a published NodeInfo as immutable and
// replaces it with a modified clone on every change (copy on write), so a
// scheduling cycle reads a snapshot of pointers without locks or copies.
type NodeInfo struct {
	// Node is nil while pods reference a node the cache has not seen.
	Node   *corev1.Node
	Labels labels.Set
	// Zone is the topology.kubernetes.io/zone label ("" when absent), read
	// once here because spreading looks at it for every node scored.
	Zone string

	Allocatable      Resource
	Requested        Resource
	NonZeroRequested Resource

	Pods []*PodInfo
	// PodsWithRequiredAntiAffinity lets the inter-pod filter check existing
	// pods' anti-affinity without walking every pod.
	PodsWithRequiredAntiAffinity []*PodInfo
	UsedPorts                    []HostPort
	// OwnerCounts counts the pods per controller owner UID.
	OwnerCounts map[types.UID]int32

	// NotReady: the Ready condition is present and not True (a node without
	// the condition, as nodes created by hand are, counts as ready).
	NotReady           bool
	NetworkUnavailable bool
}

// NewNodeInfo returns a NodeInfo for node with the given pods.
func NewNodeInfo(node *corev1.Node, pods ...*PodInfo) *NodeInfo {
	n := &NodeInfo{}
	if node != nil {
		n.SetNode(node)
	}
	for _, p := range pods {
		n.AddPod(p)
	}
	return n
}

// Name is the node's name ("" before the node is known).
func (n *NodeInfo) Name() string {
	if n.Node == nil {
		return ""
	}
	return n.Node.Name
}

// SetNode sets the node object and what is derived from it.
func (n *NodeInfo) SetNode(node *corev1.Node) {
	n.Node = node
	n.Labels = labels.Set(node.Labels)
	n.Zone = node.Labels[corev1.LabelTopologyZone]
	n.Allocatable = ResourceFromList(node.Status.Allocatable)
	n.NotReady, n.NetworkUnavailable = false, false
	for _, c := range node.Status.Conditions {
		switch c.Type {
		case corev1.NodeReady:
			n.NotReady = c.Status != corev1.ConditionTrue
		case corev1.NodeNetworkUnavailable:
			n.NetworkUnavailable = c.Status == corev1.ConditionTrue
		}
	}
}

// Clone returns a copy that can be modified without affecting n: slices
// and maps are copied, pods and the node object are shared (immutable).
func (n *NodeInfo) Clone() *NodeInfo {
	c := *n
	c.Pods = append([]*PodInfo(nil), n.Pods...)
	c.PodsWithRequiredAntiAffinity = append([]*PodInfo(nil), n.PodsWithRequiredAntiAffinity...)
	c.UsedPorts = append([]HostPort(nil), n.UsedPorts...)
	if n.OwnerCounts != nil {
		c.OwnerCounts = make(map[types.UID]int32, len(n.OwnerCounts))
		for k, v := range n.OwnerCounts {
			c.OwnerCounts[k] = v
		}
	}
	return &c
}

// AddPod accounts for p on this node.
func (n *NodeInfo) AddPod(p *PodInfo) {
	n.Pods = append(n.Pods, p)
	if len(p.RequiredAntiAffinity) > 0 {
		n.PodsWithRequiredAntiAffinity = append(n.PodsWithRequiredAntiAffinity, p)
	}
	n.Requested.Add(p.Requests)
	n.NonZeroRequested.Add(p.NonZero)
	n.UsedPorts = append(n.UsedPorts, p.Ports...)
	if p.OwnerUID != "" {
		if n.OwnerCounts == nil {
			n.OwnerCounts = map[types.UID]int32{}
		}
		n.OwnerCounts[p.OwnerUID]++
	}
}

// RemovePod removes the pod with key from this node; false if absent.
func (n *NodeInfo) RemovePod(key string) bool {
	i := indexOf(n.Pods, key)
	if i < 0 {
		return false
	}
	p := n.Pods[i]
	n.Pods = removeAt(n.Pods, i)
	if j := indexOf(n.PodsWithRequiredAntiAffinity, key); j >= 0 {
		n.PodsWithRequiredAntiAffinity = removeAt(n.PodsWithRequiredAntiAffinity, j)
	}
	n.Requested.Sub(p.Requests)
	n.NonZeroRequested.Sub(p.NonZero)
	for _, hp := range p.Ports {
		for k := range n.UsedPorts {
			if n.UsedPorts[k] == hp {
				n.UsedPorts = append(n.UsedPorts[:k], n.UsedPorts[k+1:]...)
				break
			}
		}
	}
	if p.OwnerUID != "" {
		if n.OwnerCounts[p.OwnerUID]--; n.OwnerCounts[p.OwnerUID] <= 0 {
			delete(n.OwnerCounts, p.OwnerUID)
		}
	}
	return true
}

func indexOf(pods []*PodInfo, key string) int {
	for i, p := range pods {
		if p.Key == key {
			return i
		}
	}
	return -1
}

// removeAt removes element i without keeping order (the slice is owned).
func removeAt(pods []*PodInfo, i int) []*PodInfo {
	last := len(pods) - 1
	pods[i] = pods[last]
	pods[last] = nil
	return pods[:last]
}
