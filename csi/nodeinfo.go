package csi

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// AnnotationNodeID is the Node annotation holding the node ID of every
// registered driver as a JSON object, as upstream's nodeinfomanager
// writes it.
const AnnotationNodeID = "csi.volume.kubernetes.io/nodeid"

// nodeInfo keeps the node's CSINode object and the CSI parts of its Node
// (upstream's nodeinfomanager).
type nodeInfo struct {
	client kubernetes.Interface
	node   string
}

// ensureCSINode creates the node's CSINode, without drivers, if missing,
// as upstream's kubelet does at start.
func (n nodeInfo) ensureCSINode(ctx context.Context) error {
	_, err := n.client.StorageV1().CSINodes().Get(ctx, n.node, metav1.GetOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("get CSINode %s: %w", n.node, err)
	}
	_, err = n.createCSINode(ctx)
	return err
}

func (n nodeInfo) createCSINode(ctx context.Context) (*storagev1.CSINode, error) {
	node, err := n.client.CoreV1().Nodes().Get(ctx, n.node, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get node %s: %w", n.node, err)
	}
	c := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: n.node,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{}}}
	got, err := n.client.StorageV1().CSINodes().Create(ctx, c, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return n.client.StorageV1().CSINodes().Get(ctx, n.node, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("create CSINode %s: %w", n.node, err)
	}
	return got, nil
}

// install records a registered driver: its node ID in the Node's
// annotation, its topology segments as the Node's labels, and its entry in
// CSINode (node ID, topology keys, the volume limit).
func (n nodeInfo) install(ctx context.Context, driver string, info *csipb.NodeGetInfoResponse) error {
	if info.GetNodeId() == "" {
		return fmt.Errorf("driver %s reported an empty node ID", driver)
	}
	if info.GetMaxVolumesPerNode() < 0 {
		return fmt.Errorf("driver %s reported a negative max_volumes_per_node %d", driver, info.GetMaxVolumesPerNode())
	}
	segments := info.GetAccessibleTopology().GetSegments()
	if err := n.updateNode(ctx, func(node *corev1.Node) (bool, error) {
		changed, err := setNodeID(node, driver, info.GetNodeId())
		if err != nil {
			return false, err
		}
		labeled, err := setTopologyLabels(node, segments)
		return changed || labeled, err
	}); err != nil {
		return err
	}
	entry := storagev1.CSINodeDriver{Name: driver, NodeID: info.GetNodeId(), TopologyKeys: slices.Sorted(maps.Keys(segments))}
	if max := info.GetMaxVolumesPerNode(); max > 0 {
		count := int32(min(max, int64(1<<31-1)))
		entry.Allocatable = &storagev1.VolumeNodeResources{Count: &count}
	}
	return n.updateCSINode(ctx, true, func(c *storagev1.CSINode) bool { return setDriver(c, entry) })
}

// uninstall removes a deregistered driver from CSINode and the Node's
// annotation; its topology labels stay, as upstream leaves them.
func (n nodeInfo) uninstall(ctx context.Context, driver string) error {
	if err := n.updateCSINode(ctx, false, func(c *storagev1.CSINode) bool { return removeDriver(c, driver) }); err != nil {
		return err
	}
	return n.updateNode(ctx, func(node *corev1.Node) (bool, error) { return removeNodeID(node, driver) })
}

func (n nodeInfo) updateNode(ctx context.Context, change func(*corev1.Node) (bool, error)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := n.client.CoreV1().Nodes().Get(ctx, n.node, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get node %s: %w", n.node, err)
		}
		changed, err := change(node)
		if err != nil || !changed {
			return err
		}
		if _, err := n.client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update node %s: %w", n.node, err)
		}
		return nil
	})
}

// updateCSINode changes the node's CSINode, made first if create is set
// (else a missing one needs no change).
func (n nodeInfo) updateCSINode(ctx context.Context, create bool, change func(*storagev1.CSINode) bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c, err := n.client.StorageV1().CSINodes().Get(ctx, n.node, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			if !create {
				return nil
			}
			c, err = n.createCSINode(ctx)
		}
		if err != nil {
			return fmt.Errorf("get CSINode %s: %w", n.node, err)
		}
		if !change(c) {
			return nil
		}
		if _, err := n.client.StorageV1().CSINodes().Update(ctx, c, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update CSINode %s: %w", n.node, err)
		}
		return nil
	})
}

// setDriver puts entry into c's drivers, replacing one of its name; it
// reports whether anything changed.
func setDriver(c *storagev1.CSINode, entry storagev1.CSINodeDriver) bool {
	for i := range c.Spec.Drivers {
		d := &c.Spec.Drivers[i]
		if d.Name != entry.Name {
			continue
		}
		if d.NodeID == entry.NodeID && slices.Equal(d.TopologyKeys, entry.TopologyKeys) && sameAllocatable(d.Allocatable, entry.Allocatable) {
			return false
		}
		*d = entry
		return true
	}
	c.Spec.Drivers = append(c.Spec.Drivers, entry)
	return true
}

func sameAllocatable(a, b *storagev1.VolumeNodeResources) bool {
	count := func(r *storagev1.VolumeNodeResources) int32 {
		if r == nil || r.Count == nil {
			return -1
		}
		return *r.Count
	}
	return count(a) == count(b)
}

// removeDriver drops driver from c's drivers; it reports whether it was
// there.
func removeDriver(c *storagev1.CSINode, driver string) bool {
	n := len(c.Spec.Drivers)
	c.Spec.Drivers = slices.DeleteFunc(c.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == driver })
	return len(c.Spec.Drivers) != n
}

// nodeIDs decodes the node's AnnotationNodeID (empty if absent).
func nodeIDs(node *corev1.Node) (map[string]string, error) {
	ids := map[string]string{}
	if s, ok := node.Annotations[AnnotationNodeID]; ok && s != "" {
		if err := json.Unmarshal([]byte(s), &ids); err != nil {
			return nil, fmt.Errorf("node %s: decode annotation %s: %w", node.Name, AnnotationNodeID, err)
		}
	}
	return ids, nil
}

func setNodeIDs(node *corev1.Node, ids map[string]string) error {
	if len(ids) == 0 {
		delete(node.Annotations, AnnotationNodeID)
		return nil
	}
	b, err := json.Marshal(ids) // keys sorted
	if err != nil {
		return fmt.Errorf("encode annotation %s: %w", AnnotationNodeID, err)
	}
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	node.Annotations[AnnotationNodeID] = string(b)
	return nil
}

// setNodeID records driver's node ID in the node's annotation.
func setNodeID(node *corev1.Node, driver, id string) (bool, error) {
	ids, err := nodeIDs(node)
	if err != nil {
		return false, err
	}
	if old, ok := ids[driver]; ok && old == id {
		return false, nil
	}
	ids[driver] = id
	return true, setNodeIDs(node, ids)
}

// removeNodeID drops driver from the node's annotation (the annotation
// too when it was the last).
func removeNodeID(node *corev1.Node, driver string) (bool, error) {
	ids, err := nodeIDs(node)
	if err != nil {
		return false, err
	}
	if _, ok := ids[driver]; !ok {
		return false, nil
	}
	delete(ids, driver)
	return true, setNodeIDs(node, ids)
}

// setTopologyLabels labels the node with a driver's topology segments; a
// label the node has with another value is a collision, as upstream.
func setTopologyLabels(node *corev1.Node, segments map[string]string) (bool, error) {
	changed := false
	for _, k := range slices.Sorted(maps.Keys(segments)) {
		v := segments[k]
		old, ok := node.Labels[k]
		if ok && old != v {
			return false, fmt.Errorf("detected topology value collision: driver reported %q:%q but existing label is %q:%q", k, v, k, old)
		}
		if !ok {
			if node.Labels == nil {
				node.Labels = map[string]string{}
			}
			node.Labels[k] = v
			changed = true
		}
	}
	return changed, nil
}
