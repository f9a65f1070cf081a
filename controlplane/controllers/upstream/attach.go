package upstream

import (
	"context"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/pkg/controller/volume/attachdetach"
	"k8s.io/kubernetes/pkg/controller/volume/expand"
	"k8s.io/kubernetes/pkg/volume"
	"k8s.io/kubernetes/pkg/volume/csi"
	"k8s.io/kubernetes/pkg/volume/csimigration"

	csitrans "k8s.io/csi-translation-lib"
)

// attachDetachReconcilerSync is kube-controller-manager's
// --attach-detach-reconcile-sync-period.
const attachDetachReconcilerSync = time.Minute

// csiPlugins is the one in-tree volume plugin the control plane runs:
// upstream's CSI plugin, through which the attach/detach and expand
// controllers handle CSI volumes (the in-tree hostPath, NFS, FC and iSCSI
// plugins kube-controller-manager also probes attach nothing here and
// are left out).
func csiPlugins() []volume.VolumePlugin { return csi.ProbeVolumePlugins() }

// buildAttachDetach runs upstream's attach/detach controller: for pods
// scheduled to nodes that let it manage attachment (the
// volumes.kubernetes.io/controller-managed-attach-detach annotation, which
// the nodelet sets), it creates the VolumeAttachment of each CSI volume
// whose driver requires attaching, for the driver's external-attacher to
// act on, and deletes it once no pod on the node uses the volume and the
// node no longer reports it in use.
func buildAttachDetach(ctx context.Context, cs kubernetes.Interface, cfg controllerConfig) (func(context.Context), error) {
	f := cfg.Informers
	c, err := attachdetach.NewAttachDetachController(ctx, cs,
		f.Core().V1().Pods(), f.Core().V1().Nodes(), f.Core().V1().PersistentVolumeClaims(), f.Core().V1().PersistentVolumes(),
		f.Storage().V1().CSINodes(), f.Storage().V1().CSIDrivers(), f.Storage().V1().VolumeAttachments(),
		csiPlugins(), nil, false, attachDetachReconcilerSync, false, attachdetach.DefaultTimerConfig)
	if err != nil {
		return nil, err
	}
	return c.Run, nil
}

// buildExpand runs upstream's volume expand controller: a bound claim
// whose requested size grows beyond its volume's is handed to the CSI
// driver's external-resizer (the volume.kubernetes.io/storage-resizer
// annotation), when its class allows expansion.
func buildExpand(ctx context.Context, cs kubernetes.Interface, cfg controllerConfig) (func(context.Context), error) {
	translator := csitrans.New()
	c, err := expand.NewExpandController(ctx, cs, cfg.Informers.Core().V1().PersistentVolumeClaims(),
		csiPlugins(), translator, csimigration.NewPluginManager(translator))
	if err != nil {
		return nil, err
	}
	return c.Run, nil
}
