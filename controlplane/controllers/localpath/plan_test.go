package localpath

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPlanVolume(t *testing.T) {
	class := DefaultClass()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{corev1.LabelHostname: "host-1"},
		Annotations: map[string]string{AnnotationDir: "/var/lib/nodelet/storage"}}}
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "data", UID: "u-1",
			Annotations: map[string]string{annStorageProvisioner: Provisioner, annSelectedNode: "n1"}},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}}},
	}
	if !wantsVolume(claim) {
		t.Fatal("a claim handed to the provisioner is not wanted")
	}
	pv, err := PlanVolume(claim, class, node)
	if err != nil {
		t.Fatal(err)
	}
	if pv.Name != "pvc-u-1" || pv.Spec.Local.Path != "/var/lib/nodelet/storage/pvc-u-1_db_data" ||
		pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || pv.Spec.ClaimRef.UID != "u-1" ||
		pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Values[0] != "host-1" ||
		pv.Annotations[annProvisionedBy] != Provisioner || pv.Spec.Capacity.Storage().String() != "2Gi" {
		t.Errorf("volume %+v", pv)
	}

	// A class's nodePath replaces the node's directory.
	disk := class.DeepCopy()
	disk.Parameters = map[string]string{ParamNodePath: "/mnt/disk1"}
	if pv, err := PlanVolume(claim, disk, node); err != nil || pv.Spec.Local.Path != "/mnt/disk1/pvc-u-1_db_data" {
		t.Errorf("volume of a class with nodePath: %v, %v", pv, err)
	}
	relative, unknown := disk.DeepCopy(), disk.DeepCopy()
	relative.Parameters[ParamNodePath] = "mnt/../x"
	unknown.Parameters = map[string]string{"pathPattern": "x"}

	noNode := claim.DeepCopy()
	delete(noNode.Annotations, annSelectedNode)
	bare := node.DeepCopy()
	bare.Annotations = nil
	other := class.DeepCopy()
	other.Provisioner = "example.com/nfs"
	for name, tc := range map[string]struct {
		claim *corev1.PersistentVolumeClaim
		class *storagev1.StorageClass
		node  *corev1.Node
		want  string
	}{
		"Immediate class":     {noNode, class, node, "WaitForFirstConsumer"},
		"node without a dir":  {claim, class, bare, "publishes no local-path directory"},
		"another provisioner": {claim, other, node, "not a claim of the local-path provisioner"},
		"relative nodePath":   {claim, relative, node, "not a clean absolute directory"},
		"unknown parameter":   {claim, unknown, node, `unsupported parameter "pathPattern"`},
	} {
		if _, err := PlanVolume(tc.claim, tc.class, tc.node); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}

	pv.Status.Phase = corev1.VolumeReleased
	if host, dir, ok := Reclaim(pv); !ok || host != "host-1" || dir != pv.Spec.Local.Path {
		t.Errorf("reclaim of a released volume: %q %q %v", host, dir, ok)
	}
	pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	if _, _, ok := Reclaim(pv); ok {
		t.Error("a Retain volume was reclaimed")
	}
}
