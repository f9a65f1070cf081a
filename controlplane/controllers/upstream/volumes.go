package upstream

import (
	"context"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/volume/ephemeral"
	"k8s.io/kubernetes/pkg/controller/volume/persistentvolume"
	"k8s.io/kubernetes/pkg/controller/volume/pvcprotection"
	"k8s.io/kubernetes/pkg/controller/volume/pvprotection"
)

// pvClaimBinderSyncPeriod is kube-controller-manager's
// --pvclaimbinder-sync-period.
const pvClaimBinderSyncPeriod = 15 * time.Second

// buildPersistentVolumeBinder runs upstream's PersistentVolume controller:
// it binds claims to volumes (class, size, access modes, selector,
// volumeName; WaitForFirstConsumer claims once the scheduler picked a
// node), hands dynamic provisioning to the class's external provisioner
// through the claim's storage-provisioner annotations, and releases
// volumes whose claim is gone. No in-tree volume plugin is given, so it
// neither provisions, deletes nor recycles by itself: volumes with a
// provisioner are deleted by it, others keep their Delete policy unmet
// with upstream's VolumeFailedDelete event.
func buildPersistentVolumeBinder(ctx context.Context, cs kubernetes.Interface, cfg controllerConfig) (func(context.Context), error) {
	f := cfg.Informers
	c, err := persistentvolume.NewController(ctx, persistentvolume.ControllerParameters{
		KubeClient: cs, SyncPeriod: pvClaimBinderSyncPeriod,
		VolumeInformer: f.Core().V1().PersistentVolumes(), ClaimInformer: f.Core().V1().PersistentVolumeClaims(),
		ClassInformer: f.Storage().V1().StorageClasses(), PodInformer: f.Core().V1().Pods(),
		NodeInformer: f.Core().V1().Nodes(), EnableDynamicProvisioning: true,
	})
	if err != nil {
		return nil, err
	}
	return c.Run, nil
}

// buildPVCProtection runs upstream's pvc-protection controller: the
// kubernetes.io/pvc-protection finalizer holds a deleted claim until no
// pod uses it.
func buildPVCProtection(ctx context.Context, cs kubernetes.Interface, cfg controllerConfig) (func(context.Context), error) {
	f := cfg.Informers
	c, err := pvcprotection.NewPVCProtectionController(klog.FromContext(ctx), f.Core().V1().PersistentVolumeClaims(), f.Core().V1().Pods(), cs)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) { c.Run(ctx, 1) }, nil
}

// buildPVProtection runs upstream's pv-protection controller: the
// kubernetes.io/pv-protection finalizer holds a deleted volume while a
// claim is bound to it.
func buildPVProtection(ctx context.Context, cs kubernetes.Interface, cfg controllerConfig) (func(context.Context), error) {
	c, err := pvprotection.NewPVProtectionController(klog.FromContext(ctx), cfg.Informers.Core().V1().PersistentVolumes(), cs)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) { c.Run(ctx, 1) }, nil
}

// ephemeralVolumeWorkers is kube-controller-manager's
// --concurrent-ephemeralvolume-syncs.
const ephemeralVolumeWorkers = 5

// buildEphemeralVolume runs upstream's ephemeral volume controller: a
// pod's generic ephemeral volume gets its claim, POD-VOLUME, owned by the
// pod (so it goes with it).
func buildEphemeralVolume(ctx context.Context, cs kubernetes.Interface, cfg controllerConfig) (func(context.Context), error) {
	f := cfg.Informers
	c, err := ephemeral.NewController(ctx, cs, f.Core().V1().Pods(), f.Core().V1().PersistentVolumeClaims())
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) { c.Run(ctx, ephemeralVolumeWorkers) }, nil
}
