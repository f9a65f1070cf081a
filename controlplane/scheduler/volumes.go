package scheduler

// Volume binding, as upstream's VolumeBinding plugin: before filtering, a
// pod's claims are read (missing claims and unbound Immediate claims make
// it unschedulable everywhere); the filter (plugins.VolumeBinding) keeps
// the nodes where bound volumes may be used and delayed claims
// (WaitForFirstConsumer) can get a volume; before the pod is bound, the
// chosen node's bindings are made — an existing volume is bound to its
// claim, or the claim is annotated with the selected node for its
// provisioner — and the binding waits until the PersistentVolume
// controller has bound every claim.

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	volumehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/nodelet/nodelet/controlplane/scheduler/plugins"
)

// Upstream's annotation naming the node a WaitForFirstConsumer claim is
// provisioned for, and the provisioner of classes without one.
const (
	annSelectedNode = "volume.kubernetes.io/selected-node"
	noProvisioner   = "kubernetes.io/no-provisioner"
	// bindTimeout is kube-scheduler's VolumeBinding bindTimeoutSeconds.
	bindTimeout = 600 * time.Second
)

// volumeListers read claims, volumes and classes from the informers;
// byClass indexes the volumes by class name, so that a delayed claim is
// matched against its class's volumes only (upstream's PV cache indexes
// the same way).
type volumeListers struct {
	claims  corelisters.PersistentVolumeClaimLister
	volumes corelisters.PersistentVolumeLister
	classes storagelisters.StorageClassLister
	byClass cache.Indexer
}

// classIndex names the index of volumes by spec.storageClassName.
const classIndex = "storageClassName"

func volumeClass(obj any) ([]string, error) {
	pv, ok := obj.(*corev1.PersistentVolume)
	if !ok {
		return nil, nil
	}
	return []string{pv.Spec.StorageClassName}, nil
}

// watchVolumes registers the informers volume binding reads; a change of
// any of them may make unschedulable pods fit.
func (s *Scheduler) watchVolumes(f informers.SharedInformerFactory) error {
	claims, volumes, classes := f.Core().V1().PersistentVolumeClaims(), f.Core().V1().PersistentVolumes(), f.Storage().V1().StorageClasses()
	if err := volumes.Informer().AddIndexers(cache.Indexers{classIndex: volumeClass}); err != nil {
		return fmt.Errorf("scheduler: volume index: %w", err)
	}
	s.volumes = volumeListers{claims: claims.Lister(), volumes: volumes.Lister(), classes: classes.Lister(),
		byClass: volumes.Informer().GetIndexer()}
	move := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.queue.MoveAllToActiveOrBackoff() },
		UpdateFunc: func(any, any) { s.queue.MoveAllToActiveOrBackoff() },
	}
	for _, inf := range []cache.SharedIndexInformer{claims.Informer(), volumes.Informer(), classes.Informer()} {
		if _, err := inf.AddEventHandler(move); err != nil {
			return fmt.Errorf("scheduler: volume handler: %w", err)
		}
		s.synced = append(s.synced, inf.HasSynced)
	}
	return nil
}

// claimNames are the claims a pod's volumes use: its persistentVolumeClaim
// volumes, and the claims of its generic ephemeral volumes (POD-VOLUME).
func claimNames(pod *corev1.Pod) []string {
	var out []string
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			out = append(out, v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			out = append(out, pod.Name+"-"+v.Name)
		}
	}
	return out
}

// volumeState reads the pod's claims for a cycle (nil for a pod without
// any). The reason is set when no node can fit the pod until a claim
// changes.
func (l volumeListers) volumeState(pod *corev1.Pod) (*plugins.VolumeState, string) {
	names := claimNames(pod)
	if len(names) == 0 || l.claims == nil {
		return nil, ""
	}
	vs := &plugins.VolumeState{}
	for _, name := range names {
		claim, err := l.claims.PersistentVolumeClaims(pod.Namespace).Get(name)
		if err != nil {
			return nil, fmt.Sprintf("persistentvolumeclaim %q not found", name)
		}
		if claim.DeletionTimestamp != nil {
			return nil, fmt.Sprintf("persistentvolumeclaim %q is being deleted", name)
		}
		if claim.Spec.VolumeName != "" {
			pv, err := l.volumes.Get(claim.Spec.VolumeName)
			if err != nil {
				return nil, "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
			}
			vs.Bound = append(vs.Bound, pv)
			continue
		}
		delayed, err := volumehelpers.IsDelayBindingMode(claim, l.classes)
		if err != nil || !delayed {
			return nil, plugins.ReasonUnboundImmediate
		}
		d := plugins.DelayedClaim{Claim: claim, SelectedNode: claim.Annotations[annSelectedNode]}
		if class, err := l.classes.Get(volumehelpers.GetPersistentVolumeClaimClass(claim)); err == nil {
			d.Provisionable = class.Provisioner != noProvisioner
		}
		vs.Delayed = append(vs.Delayed, d)
	}
	if len(vs.Delayed) > 0 {
		vols, err := l.candidateVolumes(vs.Delayed)
		if err != nil {
			return nil, plugins.ReasonVolumeBindConflict
		}
		vs.Volumes = vols
	}
	return vs, ""
}

// candidateVolumes are the volumes of the delayed claims' classes (all
// volumes without the index).
func (l volumeListers) candidateVolumes(delayed []plugins.DelayedClaim) ([]*corev1.PersistentVolume, error) {
	if l.byClass == nil {
		return l.volumes.List(labels.Everything())
	}
	var out []*corev1.PersistentVolume
	seen := map[string]bool{}
	for _, d := range delayed {
		class := volumehelpers.GetPersistentVolumeClaimClass(d.Claim)
		if seen[class] {
			continue
		}
		seen[class] = true
		objs, err := l.byClass.ByIndex(classIndex, class)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if pv, ok := o.(*corev1.PersistentVolume); ok {
				out = append(out, pv)
			}
		}
	}
	return out, nil
}

// bindVolumes makes the pod's delayed claims' bindings on node, then waits
// until every claim of the pod is bound (upstream's PreBind).
func (s *Scheduler) bindVolumes(ctx context.Context, pod *corev1.Pod, node string) error {
	vs, reason := s.volumes.volumeState(pod)
	if reason != "" {
		return fmt.Errorf("volumes of pod %s/%s: %s", pod.Namespace, pod.Name, reason)
	}
	if vs == nil || len(vs.Delayed) == 0 {
		return nil
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	if info := s.cache.NodeInfo(node); info != nil && info.Node != nil {
		n = info.Node
	}
	b, ok := vs.FindBindings(n)
	if !ok {
		return fmt.Errorf("volumes of pod %s/%s: %s on %s", pod.Namespace, pod.Name, plugins.ReasonVolumeBindConflict, node)
	}
	for key, pv := range b.Static {
		claim := claimOf(vs, key)
		bound, dirty, err := volumehelpers.GetBindVolumeToClaim(pv, claim)
		if err != nil {
			return err
		}
		if dirty {
			if _, err := s.client.CoreV1().PersistentVolumes().Update(ctx, bound, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("bind volume %s to claim %s: %w", pv.Name, key, err)
			}
		}
	}
	for _, claim := range b.Provision {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, annSelectedNode, node)
		if _, err := s.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Patch(ctx, claim.Name,
			types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("select node %s for claim %s/%s: %w", node, claim.Namespace, claim.Name, err)
		}
	}
	return s.waitClaimsBound(ctx, pod)
}

func claimOf(vs *plugins.VolumeState, key string) *corev1.PersistentVolumeClaim {
	for _, d := range vs.Delayed {
		if d.Claim.Namespace+"/"+d.Claim.Name == key {
			return d.Claim
		}
	}
	return nil
}

// waitClaimsBound polls the claim informer until each of the pod's claims
// is bound, or fails when a provisioning was given up (its selected node
// removed) or the bind timeout passes.
func (s *Scheduler) waitClaimsBound(ctx context.Context, pod *corev1.Pod) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, bindTimeout, true, func(context.Context) (bool, error) {
		for _, name := range claimNames(pod) {
			claim, err := s.volumes.claims.PersistentVolumeClaims(pod.Namespace).Get(name)
			if err != nil {
				return false, fmt.Errorf("claim %s/%s: %w", pod.Namespace, name, err)
			}
			if claim.Spec.VolumeName == "" || claim.Status.Phase != corev1.ClaimBound {
				return false, nil
			}
		}
		return true, nil
	})
}
