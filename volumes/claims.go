package volumes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/localpath"
)

// Claims serves the PersistentVolumeClaims pods name and the volumes bound
// to them (the API server's, which the Node authorizer lets a node read
// for its pods).
type Claims interface {
	PersistentVolumeClaim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error)
	PersistentVolume(ctx context.Context, name string) (*corev1.PersistentVolume, error)
}

// AnnotationProvisionedBy names a PersistentVolume's provisioner: the
// control plane's built-in local provisioner (localpath.Provisioner) makes
// local volumes whose directory the node creates on first use.
const AnnotationProvisionedBy = "pv.kubernetes.io/provisioned-by"

// errNoClaims fails claim volumes of a Manager without Claims.
var errNoClaims = errors.New("no source of PersistentVolumeClaims configured")

// claimPlugin provides persistentVolumeClaim and generic ephemeral volumes
// (the latter through their claim) backed by a volume on
// the node's own filesystem: hostPath and local PersistentVolumes, mounted
// as the path itself (upstream's hostPath and local plugins). The claim
// must be bound; the volume's and the pod's readOnly both make the mount
// read-only. Nothing lives under the pod directory, so teardown has
// nothing to undo and the data outlives the pod. A volume with spec.csi is
// the CSI plugin's, in its directory (csiDir), torn down by it.
type claimPlugin struct {
	claims Claims
	csi    *csiPlugin
	csiDir func(uid types.UID, volume string) string
}

func (claimPlugin) handles(vol *corev1.Volume) bool {
	return vol.PersistentVolumeClaim != nil || vol.Ephemeral != nil
}
func (claimPlugin) dirName() string { return "" }
func (claimPlugin) updatable() bool { return false }

func (p claimPlugin) setup(ctx context.Context, pod *corev1.Pod, vol *corev1.Volume, _ string) (Mount, error) {
	src := vol.PersistentVolumeClaim
	if vol.Ephemeral != nil {
		// A generic ephemeral volume is the claim POD-VOLUME that the
		// ephemeral volume controller makes for the pod.
		src = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pod.Name + "-" + vol.Name}
	}
	if p.claims == nil {
		return Mount{}, errNoClaims
	}
	claim, err := p.claims.PersistentVolumeClaim(ctx, pod.Namespace, src.ClaimName)
	if err != nil {
		return Mount{}, fmt.Errorf("get PersistentVolumeClaim %s/%s: %w", pod.Namespace, src.ClaimName, err)
	}
	if vol.Ephemeral != nil && !metav1.IsControlledBy(claim, pod) {
		// Upstream's check: a claim of that name made by someone else is
		// not this pod's volume.
		return Mount{}, fmt.Errorf("PVC %s/%s was not created for pod %s/%s (pod is not owner)", pod.Namespace, src.ClaimName, pod.Namespace, pod.Name)
	}
	if claim.Status.Phase != corev1.ClaimBound || claim.Spec.VolumeName == "" {
		return Mount{}, fmt.Errorf("PersistentVolumeClaim %s/%s is not bound (%s)", pod.Namespace, src.ClaimName, claim.Status.Phase)
	}
	pv, err := p.claims.PersistentVolume(ctx, claim.Spec.VolumeName)
	if err != nil {
		return Mount{}, fmt.Errorf("get PersistentVolume %s of claim %s/%s: %w", claim.Spec.VolumeName, pod.Namespace, src.ClaimName, err)
	}
	if ref := pv.Spec.ClaimRef; ref == nil || ref.UID != claim.UID {
		return Mount{}, fmt.Errorf("PersistentVolume %s is not bound to claim %s/%s", pv.Name, pod.Namespace, src.ClaimName)
	}
	if pv.Spec.CSI != nil && p.csi != nil {
		return p.csi.setupPV(ctx, pod, pv, src.ReadOnly, p.csiDir(pod.UID, vol.Name))
	}
	path, err := volumePath(pv)
	if err != nil {
		return Mount{}, err
	}
	// Upstream's local plugin manages ownership, its hostPath plugin not.
	measure := measureNone
	if pv.Spec.Local != nil {
		measure = measureStatfs // upstream's local plugin; its hostPath reports nothing
	}
	return Mount{HostPath: path, ReadOnly: src.ReadOnly, fsGroupManaged: pv.Spec.Local != nil, measure: measure}, nil
}

// volumePath is where a node-local PersistentVolume lives on the host,
// checked (and for the built-in provisioner's volumes created) as
// upstream's hostPath and local plugins do.
func volumePath(pv *corev1.PersistentVolume) (string, error) {
	switch {
	case pv.Spec.HostPath != nil:
		if err := checkHostPath(pv.Spec.HostPath); err != nil {
			return "", fmt.Errorf("PersistentVolume %s: %w", pv.Name, err)
		}
		return pv.Spec.HostPath.Path, nil
	case pv.Spec.Local != nil:
		path := pv.Spec.Local.Path
		if path == "" || hasDotDot(path) {
			return "", fmt.Errorf("PersistentVolume %s: bad local path %q", pv.Name, path)
		}
		typ := corev1.HostPathDirectory
		if pv.Annotations[AnnotationProvisionedBy] == localpath.Provisioner {
			typ = corev1.HostPathDirectoryOrCreate
			// The base may be a class's nodePath: mark it as one this
			// node made volumes in, so that it may remove them.
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return "", fmt.Errorf("PersistentVolume %s: %w", pv.Name, err)
			}
			if err := localpath.MarkBase(filepath.Dir(path)); err != nil {
				return "", fmt.Errorf("PersistentVolume %s: %w", pv.Name, err)
			}
		}
		if err := CheckHostPathType(path, typ); err != nil {
			return "", fmt.Errorf("PersistentVolume %s: %w", pv.Name, err)
		}
		return path, nil
	}
	return "", fmt.Errorf("PersistentVolume %s: only hostPath, local and CSI volumes are supported on this node", pv.Name)
}

func (claimPlugin) teardown(context.Context, string) error { return nil }
