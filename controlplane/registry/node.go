package registry

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
)

func nodeResource() *Resource {
	return &Resource{
		GroupVersion: corev1.SchemeGroupVersion,
		Name:         "nodes",
		Kind:         "Node",
		ListKind:     "NodeList",
		ShortNames:   []string{"no"},
		Verbs:        allVerbs(),
		New:          func() runtime.Object { return &corev1.Node{} },
		NewList:      func() runtime.Object { return &corev1.NodeList{} },
		// proxy reaches the node's own API through the API server.
		Subresources: []string{"status", "proxy"},

		// A node registering itself sends its status with the create, and
		// upstream keeps it, so there is no PrepareForCreate.
		Default:          mutate(defaultNode),
		PrepareForUpdate: mutate2(func(n, old *corev1.Node) { n.Status = *old.Status.DeepCopy() }),
		PrepareForStatusUpdate: mutate2(func(n, old *corev1.Node) {
			n.Spec = *old.Spec.DeepCopy()
			keepMetaForStatus(&n.ObjectMeta, &old.ObjectMeta)
			defaultNode(n)
		}),

		Fields: selectable(func(n *corev1.Node) fields.Set {
			return fields.Set{"spec.unschedulable": fieldsBool(n.Spec.Unschedulable)}
		}),
		Columns: nodeColumns(),
		Row:     row(nodeRow),
	}
}

// defaultNode defaults allocatable to capacity and keeps podCIDR and
// podCIDRs in step, as the v1 defaults and conversion do.
func defaultNode(n *corev1.Node) {
	if n.Status.Allocatable == nil && n.Status.Capacity != nil {
		n.Status.Allocatable = n.Status.Capacity.DeepCopy()
	}
	if len(n.Spec.PodCIDRs) == 0 && n.Spec.PodCIDR != "" {
		n.Spec.PodCIDRs = []string{n.Spec.PodCIDR}
	}
	if len(n.Spec.PodCIDRs) > 0 {
		n.Spec.PodCIDR = n.Spec.PodCIDRs[0]
	}
}
