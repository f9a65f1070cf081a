package plugins

import (
	corev1 "k8s.io/api/core/v1"
	volumehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/nodelet/nodelet/controlplane/scheduler/framework"
)

// Upstream VolumeBinding's reasons.
const (
	ReasonVolumeNodeConflict = "node(s) had volume node affinity conflict"
	ReasonVolumeBindConflict = "node(s) didn't find available persistent volumes to bind"
	ReasonUnboundImmediate   = "pod has unbound immediate PersistentVolumeClaims"
)

var (
	rVolumeNodeConflict = []string{ReasonVolumeNodeConflict}
	rVolumeBindConflict = []string{ReasonVolumeBindConflict}
)

// VolumeState is what upstream's VolumeBinding plugin finds before
// filtering: the volumes already bound to the pod's claims, and the pod's
// claims whose binding waits for a node (WaitForFirstConsumer) with the
// volumes that might match them.
type VolumeState struct {
	// Bound are the volumes bound to the pod's bound claims: a node must
	// satisfy each one's node affinity.
	Bound []*corev1.PersistentVolume
	// Delayed are the pod's unbound claims of WaitForFirstConsumer classes.
	Delayed []DelayedClaim
	// Volumes are the cluster's volumes, candidates for Delayed claims.
	Volumes []*corev1.PersistentVolume
}

// DelayedClaim is an unbound claim that waits for its first consumer.
type DelayedClaim struct {
	Claim *corev1.PersistentVolumeClaim
	// Provisionable: the claim's class names a provisioner, so a node
	// without a matching volume can still get one made.
	Provisionable bool
	// SelectedNode is the node a provisioning already started for (the
	// claim's volume.kubernetes.io/selected-node), "" if none.
	SelectedNode string
}

// VolumeBindings is how a pod's delayed claims get volumes on one node:
// the existing volumes chosen for some (by claim key namespace/name), and
// the claims left to provision there.
type VolumeBindings struct {
	Static    map[string]*corev1.PersistentVolume
	Provision []*corev1.PersistentVolumeClaim
}

// VolumeBinding rejects a node that a bound volume's node affinity
// excludes, or where a delayed claim finds neither a volume nor a
// provisioner. A nil state accepts every node.
func VolumeBinding(vs *VolumeState, n *framework.NodeInfo) []string {
	if vs == nil || n.Node == nil {
		return nil
	}
	for _, pv := range vs.Bound {
		if volumehelpers.CheckNodeAffinity(pv, n.Labels) != nil {
			return rVolumeNodeConflict
		}
	}
	if _, ok := vs.FindBindings(n.Node); !ok {
		return rVolumeBindConflict
	}
	return nil
}

// FindBindings chooses, as upstream's binder does, the smallest matching
// volume on node for each delayed claim (no volume twice), else
// provisioning when the class allows it there; ok is false when some
// claim can have neither.
func (vs *VolumeState) FindBindings(node *corev1.Node) (VolumeBindings, bool) {
	b := VolumeBindings{Static: map[string]*corev1.PersistentVolume{}}
	if vs == nil {
		return b, true
	}
	chosen := map[string]*corev1.PersistentVolume{}
	for _, d := range vs.Delayed {
		if d.SelectedNode != "" {
			// Provisioning already started for a node: only that one will do.
			if d.SelectedNode != node.Name {
				return b, false
			}
			continue
		}
		pv, err := volumehelpers.FindMatchingVolume(d.Claim, vs.Volumes, node, chosen, false, true)
		switch {
		case err == nil && pv != nil:
			chosen[pv.Name] = pv
			b.Static[d.Claim.Namespace+"/"+d.Claim.Name] = pv
		case d.Provisionable:
			b.Provision = append(b.Provision, d.Claim)
		default:
			return b, false
		}
	}
	return b, true
}
