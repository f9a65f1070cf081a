package csi

import (
	"context"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestNodeInfo: installing a driver makes the CSINode (owned by the Node)
// with the driver's entry, annotates and labels the Node; a second driver
// joins, a topology collision is refused, uninstalling removes the entry
// and the annotation's key but keeps the labels.
func TestNodeInfo(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid",
		Labels: map[string]string{"zone": "a"}}})
	ni := nodeInfo{client: client, node: "n1"}
	if err := ni.install(ctx, "b.csi", &csipb.NodeGetInfoResponse{NodeId: "id-b", MaxVolumesPerNode: 7,
		AccessibleTopology: &csipb.Topology{Segments: map[string]string{"zone": "a", "b.csi/node": "n1"}}}); err != nil {
		t.Fatal(err)
	}
	if err := ni.install(ctx, "a.csi", &csipb.NodeGetInfoResponse{NodeId: "id-a"}); err != nil {
		t.Fatal(err)
	}
	c, err := client.StorageV1().CSINodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.OwnerReferences) != 1 || c.OwnerReferences[0].Kind != "Node" || c.OwnerReferences[0].UID != "node-uid" {
		t.Errorf("owner references %+v", c.OwnerReferences)
	}
	if len(c.Spec.Drivers) != 2 {
		t.Fatalf("drivers %+v", c.Spec.Drivers)
	}
	b := c.Spec.Drivers[0]
	if b.Name != "b.csi" || b.NodeID != "id-b" || len(b.TopologyKeys) != 2 || b.TopologyKeys[0] != "b.csi/node" ||
		b.Allocatable == nil || *b.Allocatable.Count != 7 {
		t.Errorf("driver entry %+v", b)
	}
	if a := c.Spec.Drivers[1]; a.Allocatable != nil || a.TopologyKeys != nil {
		t.Errorf("driver without limit or topology: %+v", a)
	}
	node, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if got := node.Annotations[AnnotationNodeID]; got != `{"a.csi":"id-a","b.csi":"id-b"}` {
		t.Errorf("annotation %s", got)
	}
	if node.Labels["b.csi/node"] != "n1" {
		t.Errorf("labels %v", node.Labels)
	}
	if err := ni.install(ctx, "c.csi", &csipb.NodeGetInfoResponse{NodeId: "id-c",
		AccessibleTopology: &csipb.Topology{Segments: map[string]string{"zone": "b"}}}); err == nil {
		t.Error("topology collision accepted")
	}
	if err := ni.uninstall(ctx, "b.csi"); err != nil {
		t.Fatal(err)
	}
	if err := ni.uninstall(ctx, "a.csi"); err != nil {
		t.Fatal(err)
	}
	c, _ = client.StorageV1().CSINodes().Get(ctx, "n1", metav1.GetOptions{})
	if len(c.Spec.Drivers) != 0 {
		t.Errorf("drivers after uninstall %+v", c.Spec.Drivers)
	}
	node, _ = client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if _, ok := node.Annotations[AnnotationNodeID]; ok || node.Labels["b.csi/node"] != "n1" {
		t.Errorf("node after uninstall: annotations %v labels %v", node.Annotations, node.Labels)
	}
}
