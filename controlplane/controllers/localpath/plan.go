// Package localpath is the control plane's built-in local provisioner and
// the default StorageClass it serves, local-path (WaitForFirstConsumer,
// Delete): a claim of the class is provisioned, once the scheduler chose
// its pod's node, as a local PersistentVolume pinned to that node, whose
// directory the node's agent creates on first use (no helper pod, no
// image). When a volume of the class is released with the Delete policy,
// the volume is deleted and its directory is handed to its node for
// removal through the Node's AnnotationCleanup, which the nodelet drains.
//
// Where a node keeps these directories is its own setting
// (nodelet --local-path-dir), published on its Node as AnnotationDir.
//
// plan.go decides (pure); localpath.go watches and acts.
package localpath

import (
	"errors"
	"fmt"
	"path"
	"slices"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	nodelocalpath "github.com/nodelet/nodelet/localpath"
)

// Names the provisioner and the nodes agree on (the node's side:
// github.com/nodelet/nodelet/localpath).
const (
	// Provisioner is the class's provisioner and the volumes' provisioned-by.
	Provisioner = nodelocalpath.Provisioner
	// ClassName is the default StorageClass made at start.
	ClassName = "local-path"
	// AnnotationDir on a Node is the directory its agent keeps local-path
	// volumes in; AnnotationCleanup lists the directories of deleted
	// volumes it is to remove.
	AnnotationDir     = nodelocalpath.AnnotationDir
	AnnotationCleanup = nodelocalpath.AnnotationCleanup

	annProvisionedBy       = "pv.kubernetes.io/provisioned-by"
	annStorageProvisioner  = "volume.kubernetes.io/storage-provisioner"
	annBetaStorageProvider = "volume.beta.kubernetes.io/storage-provisioner"
	annSelectedNode        = "volume.kubernetes.io/selected-node"
	annDefaultClass        = "storageclass.kubernetes.io/is-default-class"
)

// DefaultClass is the default StorageClass: local-path, made by the
// provisioner when missing (and never changed once there).
func DefaultClass() *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: ClassName, Annotations: map[string]string{annDefaultClass: "true"}},
		Provisioner:       Provisioner,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	}
}

// ErrNotForUs marks claims this provisioner leaves alone.
var ErrNotForUs = errors.New("not a claim of the local-path provisioner")

// wantsVolume reports whether the claim waits for a volume of this
// provisioner: unbound, and handed to it by the PersistentVolume
// controller.
func wantsVolume(claim *corev1.PersistentVolumeClaim) bool {
	if claim.Spec.VolumeName != "" || claim.DeletionTimestamp != nil {
		return false
	}
	return claim.Annotations[annStorageProvisioner] == Provisioner || claim.Annotations[annBetaStorageProvider] == Provisioner
}

// VolumeName is the volume made for a claim, as external provisioners
// name them.
func VolumeName(claim *corev1.PersistentVolumeClaim) string { return "pvc-" + string(claim.UID) }

// ParamNodePath is the class parameter choosing the directory volumes are
// made in on every node, instead of each node's own (rancher's
// local-path-provisioner spells it the same way).
const ParamNodePath = "nodePath"

// PlanVolume is the volume for claim on node, per class: a local volume in
// the node's directory (or the class's nodePath), pinned to the node,
// pre-bound to the claim. It fails for a claim without a selected node
// (the class must be WaitForFirstConsumer), a node whose agent has no
// directory, or a class with a parameter other than a clean absolute
// nodePath.
func PlanVolume(claim *corev1.PersistentVolumeClaim, class *storagev1.StorageClass, node *corev1.Node) (*corev1.PersistentVolume, error) {
	if class.Provisioner != Provisioner {
		return nil, ErrNotForUs
	}
	if claim.Annotations[annSelectedNode] == "" {
		return nil, errors.New("no node selected: the class must bind WaitForFirstConsumer")
	}
	if sel := claim.Spec.Selector; sel != nil && len(sel.MatchLabels)+len(sel.MatchExpressions) > 0 {
		return nil, errors.New("claim selector is not supported")
	}
	if claim.Spec.DataSource != nil || claim.Spec.DataSourceRef != nil {
		return nil, errors.New("data sources are not supported")
	}
	dir, err := baseDir(class, node)
	if err != nil {
		return nil, err
	}
	size, ok := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		return nil, errors.New("claim requests no storage")
	}
	hostname := node.Labels[corev1.LabelHostname]
	if hostname == "" {
		hostname = node.Name
	}
	name := VolumeName(claim)
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{annProvisionedBy: Provisioner}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   slices.Clone(claim.Spec.AccessModes),
			VolumeMode:                    claim.Spec.VolumeMode,
			StorageClassName:              class.Name,
			PersistentVolumeReclaimPolicy: ptr.Deref(class.ReclaimPolicy, corev1.PersistentVolumeReclaimDelete),
			MountOptions:                  slices.Clone(class.MountOptions),
			PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{
				Path: path.Join(dir, name+"_"+claim.Namespace+"_"+claim.Name)}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{hostname}}},
			}}}},
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID, ResourceVersion: claim.ResourceVersion},
		},
	}, nil
}

// Reclaim is what to do with a volume of this provisioner: the directory
// to hand to its node (and the node) before deleting the volume; ok is
// false for volumes to leave alone.
func Reclaim(pv *corev1.PersistentVolume) (node, dir string, ok bool) {
	if pv.Annotations[annProvisionedBy] != Provisioner || pv.Status.Phase != corev1.VolumeReleased ||
		pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || pv.DeletionTimestamp != nil ||
		pv.Spec.Local == nil {
		return "", "", false
	}
	return volumeNode(pv), pv.Spec.Local.Path, true
}

// volumeNode is the hostname a provisioned volume is pinned to.
func volumeNode(pv *corev1.PersistentVolume) string {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return ""
	}
	for _, t := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, e := range t.MatchExpressions {
			if e.Key == corev1.LabelHostname && len(e.Values) == 1 {
				return e.Values[0]
			}
		}
	}
	return ""
}

// baseDir is where the volume's directory goes: the class's nodePath, else
// the node's own directory.
func baseDir(class *storagev1.StorageClass, node *corev1.Node) (string, error) {
	for k, v := range class.Parameters {
		if k != ParamNodePath {
			return "", fmt.Errorf("unsupported parameter %q (only %s is)", k, ParamNodePath)
		}
		if !path.IsAbs(v) || path.Clean(v) != v || v == "/" {
			return "", fmt.Errorf("parameter %s %q is not a clean absolute directory below /", ParamNodePath, v)
		}
		return v, nil
	}
	dir := node.Annotations[AnnotationDir]
	if dir == "" || !path.IsAbs(dir) {
		return "", fmt.Errorf("node %s publishes no local-path directory (%s)", node.Name, AnnotationDir)
	}
	return dir, nil
}
