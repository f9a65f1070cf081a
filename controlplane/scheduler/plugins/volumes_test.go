package plugins

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/controlplane/scheduler/framework"
)

func localVolume(name, node, size, class string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
		Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
		AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		StorageClassName:              class,
		PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/data/" + name}},
		PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
		}}}},
	}, Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeAvailable}}
}

func delayedClaim(name, size, class string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: "uid-" + "claim"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &class,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		}}
}

func volNode(name string) *framework.NodeInfo {
	return framework.NewNodeInfo(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}})
}

// TestVolumeBinding: bound volumes pin the pod to the nodes their
// affinity allows; a delayed claim fits where a large enough volume is
// (the smallest is chosen, never one twice) or its class provisions, and
// only on the node a provisioning started for.
func TestVolumeBinding(t *testing.T) {
	a, b := volNode("a"), volNode("b")
	bound := &VolumeState{Bound: []*corev1.PersistentVolume{localVolume("pv-a", "a", "1Gi", "local")}}
	if r := VolumeBinding(bound, a); r != nil {
		t.Errorf("bound volume on its node: %v", r)
	}
	if r := VolumeBinding(bound, b); len(r) != 1 || r[0] != ReasonVolumeNodeConflict {
		t.Errorf("bound volume elsewhere: %v", r)
	}

	vols := []*corev1.PersistentVolume{localVolume("big-a", "a", "10Gi", "local"), localVolume("small-a", "a", "2Gi", "local"),
		localVolume("tiny-b", "b", "100Mi", "local")}
	static := &VolumeState{Delayed: []DelayedClaim{{Claim: delayedClaim("data", "1Gi", "local")}}, Volumes: vols}
	if r := VolumeBinding(static, b); len(r) != 1 || r[0] != ReasonVolumeBindConflict {
		t.Errorf("no volume large enough on b: %v", r)
	}
	got, ok := static.FindBindings(a.Node)
	if !ok || got.Static["default/data"] == nil || got.Static["default/data"].Name != "small-a" || len(got.Provision) != 0 {
		t.Errorf("bindings on a: %+v %v, want the smallest fitting volume", got, ok)
	}
	two := &VolumeState{Delayed: []DelayedClaim{{Claim: delayedClaim("one", "1Gi", "local")}, {Claim: delayedClaim("two", "1Gi", "local")},
		{Claim: delayedClaim("three", "1Gi", "local")}}, Volumes: vols}
	if _, ok := two.FindBindings(a.Node); ok {
		t.Error("three claims fit on two volumes")
	}

	dynamic := &VolumeState{Delayed: []DelayedClaim{{Claim: delayedClaim("data", "5Gi", "local-path"), Provisionable: true}}, Volumes: vols}
	got, ok = dynamic.FindBindings(b.Node)
	if !ok || len(got.Provision) != 1 || len(got.Static) != 0 {
		t.Errorf("a provisionable claim on b: %+v %v", got, ok)
	}
	started := &VolumeState{Delayed: []DelayedClaim{{Claim: delayedClaim("data", "5Gi", "local-path"), Provisionable: true, SelectedNode: "a"}}}
	if VolumeBinding(started, a) != nil || VolumeBinding(started, b) == nil {
		t.Error("a claim being provisioned for a fits only there")
	}
	if VolumeBinding(nil, a) != nil {
		t.Error("no claims rejected a node")
	}
}
