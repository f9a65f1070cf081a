package registry

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/ptr"
)

// persistentVolumeClaimResource serves PersistentVolumeClaims as upstream's
// strategy does: status reset on create and kept on update, the data source
// fields made consistent. Upstream's defaulter, which also runs when it
// reads claims back from etcd, makes an empty phase Pending; the hooks do
// that here since claims are not re-defaulted on read. Nothing binds or
// provisions them yet; the StatefulSet controller creates and watches them.
func persistentVolumeClaimResource() *Resource {
	return &Resource{
		GroupVersion: corev1.SchemeGroupVersion,
		Name:         "persistentvolumeclaims",
		Kind:         "PersistentVolumeClaim",
		ListKind:     "PersistentVolumeClaimList",
		Namespaced:   true,
		ShortNames:   []string{"pvc"},
		Verbs:        allVerbs(),
		New:          func() runtime.Object { return &corev1.PersistentVolumeClaim{} },
		NewList:      func() runtime.Object { return &corev1.PersistentVolumeClaimList{} },
		Subresources: []string{"status"},

		PrepareForCreate: mutate(func(pvc *corev1.PersistentVolumeClaim) {
			pvc.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}
			enforceDataSourceCompatibility(&pvc.Spec, nil)
			normalizeDataSources(&pvc.Spec)
		}),
		PrepareForUpdate: mutate2(func(pvc, old *corev1.PersistentVolumeClaim) {
			pvc.Status = *old.Status.DeepCopy()
			enforceDataSourceCompatibility(&pvc.Spec, &old.Spec)
			normalizeDataSources(&pvc.Spec)
		}),
		PrepareForStatusUpdate: mutate2(func(pvc, old *corev1.PersistentVolumeClaim) {
			pvc.Spec = *old.Spec.DeepCopy()
			keepMetaForStatus(&pvc.ObjectMeta, &old.ObjectMeta)
			if pvc.Status.Phase == "" {
				pvc.Status.Phase = corev1.ClaimPending
			}
		}),

		Columns: persistentVolumeClaimColumns(),
		Row:     row(persistentVolumeClaimRow),
	}
}

// enforceDataSourceCompatibility is upstream's
// EnforceDataSourceBackwardsCompatibility: without a dataSourceRef (and
// unless the old claim used a data source), dataSource may only name a
// claim or a volume snapshot; anything else is dropped.
func enforceDataSourceCompatibility(spec, old *corev1.PersistentVolumeClaimSpec) {
	if old != nil && (old.DataSource != nil || old.DataSourceRef != nil) {
		return
	}
	if spec.DataSourceRef != nil || spec.DataSource == nil {
		return
	}
	ds := spec.DataSource
	group := ""
	if ds.APIGroup != nil {
		group = *ds.APIGroup
	}
	claim := ds.Kind == "PersistentVolumeClaim" && group == ""
	snapshot := ds.Kind == "VolumeSnapshot" && group == "snapshot.storage.k8s.io"
	if !claim && !snapshot {
		spec.DataSource = nil
	}
}

// normalizeDataSources is upstream's NormalizeDataSources: dataSource and
// dataSourceRef mirror each other when only one is set (a namespaced ref
// has no dataSource counterpart).
func normalizeDataSources(spec *corev1.PersistentVolumeClaimSpec) {
	switch {
	case spec.DataSource != nil && spec.DataSourceRef == nil:
		ds := spec.DataSource
		spec.DataSourceRef = &corev1.TypedObjectReference{Kind: ds.Kind, Name: ds.Name}
		if ds.APIGroup != nil {
			spec.DataSourceRef.APIGroup = ptr.To(*ds.APIGroup)
		}
	case spec.DataSourceRef != nil && spec.DataSource == nil:
		ref := spec.DataSourceRef
		if ref.Namespace != nil && *ref.Namespace != "" {
			return
		}
		spec.DataSource = &corev1.TypedLocalObjectReference{Kind: ref.Kind, Name: ref.Name}
		if ref.APIGroup != nil {
			spec.DataSource.APIGroup = ptr.To(*ref.APIGroup)
		}
	}
}

func persistentVolumeClaimColumns() []metav1.TableColumnDefinition {
	spec, status := corev1.PersistentVolumeClaimSpec{}.SwaggerDoc(), corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Status", Type: "string", Description: status["phase"]},
		{Name: "Volume", Type: "string", Description: spec["volumeName"]},
		{Name: "Capacity", Type: "string", Description: status["capacity"]},
		{Name: "Access Modes", Type: "string", Description: status["accessModes"]},
		{Name: "StorageClass", Type: "string", Description: "StorageClass of the pvc"},
		{Name: "VolumeAttributesClass", Type: "string", Description: "VolumeAttributesClass of the pvc"},
		ageColumn(),
		{Name: "VolumeMode", Type: "string", Priority: 1, Description: spec["volumeMode"]},
	}
}

// persistentVolumeClaimRow is upstream's printPersistentVolumeClaim: the
// capacity and access modes show only once the claim is bound to a volume.
func persistentVolumeClaimRow(pvc *corev1.PersistentVolumeClaim, now time.Time) []interface{} {
	phase := string(pvc.Status.Phase)
	if pvc.DeletionTimestamp != nil {
		phase = "Terminating"
	}
	attrClass, mode, capacity, modes := "<unset>", "<unset>", "", ""
	if pvc.Spec.VolumeAttributesClassName != nil {
		attrClass = *pvc.Spec.VolumeAttributesClassName
	}
	if pvc.Spec.VolumeName != "" {
		modes = accessModesString(pvc.Status.AccessModes)
		storage := pvc.Status.Capacity[corev1.ResourceStorage]
		capacity = storage.String()
	}
	if pvc.Spec.VolumeMode != nil {
		mode = string(*pvc.Spec.VolumeMode)
	}
	return []interface{}{pvc.Name, phase, pvc.Spec.VolumeName, capacity, modes,
		storagehelpers.GetPersistentVolumeClaimClass(pvc), attrClass, age(pvc.CreationTimestamp, now), mode}
}

// accessModesString is upstream's GetAccessModesAsString: RWO, ROX, RWX,
// RWOP in that order, each once.
func accessModesString(modes []corev1.PersistentVolumeAccessMode) string {
	var out []string
	for _, m := range []struct {
		mode  corev1.PersistentVolumeAccessMode
		short string
	}{
		{corev1.ReadWriteOnce, "RWO"}, {corev1.ReadOnlyMany, "ROX"},
		{corev1.ReadWriteMany, "RWX"}, {corev1.ReadWriteOncePod, "RWOP"},
	} {
		for _, have := range modes {
			if have == m.mode {
				out = append(out, m.short)
				break
			}
		}
	}
	return strings.Join(out, ",")
}

// persistentVolumeResource serves PersistentVolumes as upstream's
// strategy does: a new volume is Pending with its phase transition time
// set; the status is kept on updates of the volume and the spec on status
// updates, where a phase change moves the transition time.
func persistentVolumeResource() *Resource {
	return &Resource{
		GroupVersion: corev1.SchemeGroupVersion,
		Name:         "persistentvolumes",
		Kind:         "PersistentVolume",
		ListKind:     "PersistentVolumeList",
		ShortNames:   []string{"pv"},
		Verbs:        allVerbs(),
		New:          func() runtime.Object { return &corev1.PersistentVolume{} },
		NewList:      func() runtime.Object { return &corev1.PersistentVolumeList{} },
		Subresources: []string{"status"},

		PrepareForCreate: mutate(func(pv *corev1.PersistentVolume) {
			now := metav1.Now()
			pv.Status = corev1.PersistentVolumeStatus{Phase: corev1.VolumePending, LastPhaseTransitionTime: &now}
		}),
		PrepareForUpdate: mutate2(func(pv, old *corev1.PersistentVolume) { pv.Status = *old.Status.DeepCopy() }),
		PrepareForStatusUpdate: mutate2(func(pv, old *corev1.PersistentVolume) {
			pv.Spec = *old.Spec.DeepCopy()
			keepMetaForStatus(&pv.ObjectMeta, &old.ObjectMeta)
			switch {
			case old.Status.Phase == pv.Status.Phase && pv.Status.LastPhaseTransitionTime == nil:
				pv.Status.LastPhaseTransitionTime = old.Status.LastPhaseTransitionTime
			case old.Status.Phase != pv.Status.Phase && (pv.Status.LastPhaseTransitionTime == nil ||
				pv.Status.LastPhaseTransitionTime.Equal(old.Status.LastPhaseTransitionTime)):
				now := metav1.Now()
				pv.Status.LastPhaseTransitionTime = &now
			}
		}),

		Columns: persistentVolumeColumns(),
		Row:     row(persistentVolumeRow),
	}
}

func persistentVolumeColumns() []metav1.TableColumnDefinition {
	spec, status := corev1.PersistentVolumeSpec{}.SwaggerDoc(), corev1.PersistentVolumeStatus{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Capacity", Type: "string", Description: spec["capacity"]},
		{Name: "Access Modes", Type: "string", Description: spec["accessModes"]},
		{Name: "Reclaim Policy", Type: "string", Description: spec["persistentVolumeReclaimPolicy"]},
		{Name: "Status", Type: "string", Description: status["phase"]},
		{Name: "Claim", Type: "string", Description: spec["claimRef"]},
		{Name: "StorageClass", Type: "string", Description: "StorageClass of the pv"},
		{Name: "VolumeAttributesClass", Type: "string", Description: "VolumeAttributesClass of the pv"},
		{Name: "Reason", Type: "string", Description: status["reason"]},
		ageColumn(),
		{Name: "VolumeMode", Type: "string", Priority: 1, Description: spec["volumeMode"]},
	}
}

// persistentVolumeRow is upstream's printPersistentVolume.
func persistentVolumeRow(pv *corev1.PersistentVolume, now time.Time) []interface{} {
	claim := ""
	if ref := pv.Spec.ClaimRef; ref != nil {
		claim = ref.Namespace + "/" + ref.Name
	}
	phase := string(pv.Status.Phase)
	if pv.DeletionTimestamp != nil {
		phase = "Terminating"
	}
	mode, attrClass := "<unset>", "<unset>"
	if pv.Spec.VolumeMode != nil {
		mode = string(*pv.Spec.VolumeMode)
	}
	if pv.Spec.VolumeAttributesClassName != nil {
		attrClass = *pv.Spec.VolumeAttributesClassName
	}
	capacity := pv.Spec.Capacity[corev1.ResourceStorage]
	return []interface{}{pv.Name, capacity.String(), accessModesString(pv.Spec.AccessModes),
		string(pv.Spec.PersistentVolumeReclaimPolicy), phase, claim, storagehelpers.GetPersistentVolumeClass(pv),
		attrClass, pv.Status.Reason, age(pv.CreationTimestamp, now), mode}
}
