package registry

import (
	"time"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// Upstream's annotations marking the default StorageClass (the beta one
// is still honoured).
const (
	AnnotationDefaultStorageClass     = "storageclass.kubernetes.io/is-default-class"
	annotationBetaDefaultStorageClass = "storageclass.beta.kubernetes.io/is-default-class"
)

// storageClassResource serves storage.k8s.io/v1 StorageClasses: which
// provisioner makes a claim's volume, with what reclaim policy and binding
// mode. Upstream's defaulters give reclaimPolicy Delete and
// volumeBindingMode Immediate; its validation keeps the provisioner,
// parameters, reclaim policy and binding mode immutable.
func storageClassResource() *Resource {
	return &Resource{
		GroupVersion: storagev1.SchemeGroupVersion,
		Name:         "storageclasses",
		Kind:         "StorageClass",
		ListKind:     "StorageClassList",
		ShortNames:   []string{"sc"},
		Verbs:        allVerbs(),
		New:          func() runtime.Object { return &storagev1.StorageClass{} },
		NewList:      func() runtime.Object { return &storagev1.StorageClassList{} },
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			{Name: "Provisioner", Type: "string", Description: "Indicates the type of the provisioner."},
			{Name: "ReclaimPolicy", Type: "string", Description: "Dynamically provisioned PersistentVolumes of this storage class are created with this reclaimPolicy. Defaults to Delete."},
			{Name: "VolumeBindingMode", Type: "string", Description: "VolumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound. When unset, VolumeBindingImmediate is used."},
			{Name: "AllowVolumeExpansion", Type: "string", Description: "AllowVolumeExpansion shows whether the storage class allow volume expand."},
			ageColumn(),
		},
		Row: row(storageClassRow),
	}
}

// IsDefaultStorageClass reports whether the class is annotated default.
func IsDefaultStorageClass(meta metav1.ObjectMeta) bool {
	return meta.Annotations[AnnotationDefaultStorageClass] == "true" || meta.Annotations[annotationBetaDefaultStorageClass] == "true"
}

// storageClassRow is upstream's printStorageClass.
func storageClassRow(sc *storagev1.StorageClass, now time.Time) []interface{} {
	name := sc.Name
	if IsDefaultStorageClass(sc.ObjectMeta) {
		name += " (default)"
	}
	reclaim := string(ptr.Deref(sc.ReclaimPolicy, "Delete"))
	binding := string(ptr.Deref(sc.VolumeBindingMode, storagev1.VolumeBindingImmediate))
	return []interface{}{name, sc.Provisioner, reclaim, binding, ptr.Deref(sc.AllowVolumeExpansion, false), age(sc.CreationTimestamp, now)}
}

// csiNodeResource serves storage.k8s.io/v1 CSINodes: the CSI drivers a
// node's agent registered, with their node IDs and volume limits.
func csiNodeResource() *Resource {
	return &Resource{
		GroupVersion: storagev1.SchemeGroupVersion,
		Name:         "csinodes",
		Kind:         "CSINode",
		ListKind:     "CSINodeList",
		Verbs:        allVerbs(),
		New:          func() runtime.Object { return &storagev1.CSINode{} },
		NewList:      func() runtime.Object { return &storagev1.CSINodeList{} },
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			{Name: "Drivers", Type: "integer", Description: "Drivers indicates the number of CSI drivers registered on the node"},
			ageColumn(),
		},
		Row: row(func(n *storagev1.CSINode, now time.Time) []interface{} {
			return []interface{}{n.Name, int64(len(n.Spec.Drivers)), age(n.CreationTimestamp, now)}
		}),
	}
}

// csiStorageCapacityResource serves storage.k8s.io/v1 CSIStorageCapacities:
// how much a CSI driver can provision for a class in a topology segment,
// which the scheduler reads for WaitForFirstConsumer claims.
func csiStorageCapacityResource() *Resource {
	return &Resource{
		GroupVersion: storagev1.SchemeGroupVersion,
		Name:         "csistoragecapacities",
		Kind:         "CSIStorageCapacity",
		ListKind:     "CSIStorageCapacityList",
		Namespaced:   true,
		Verbs:        allVerbs(),
		New:          func() runtime.Object { return &storagev1.CSIStorageCapacity{} },
		NewList:      func() runtime.Object { return &storagev1.CSIStorageCapacityList{} },
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			{Name: "StorageClassName", Type: "string", Description: storagev1.CSIStorageCapacity{}.SwaggerDoc()["storageClassName"]},
			{Name: "Capacity", Type: "string", Description: storagev1.CSIStorageCapacity{}.SwaggerDoc()["capacity"]},
			ageColumn(),
		},
		Row: row(func(c *storagev1.CSIStorageCapacity, now time.Time) []interface{} {
			capacity := "<unset>"
			if c.Capacity != nil {
				capacity = c.Capacity.String()
			}
			return []interface{}{c.Name, c.StorageClassName, capacity, age(c.CreationTimestamp, now)}
		}),
	}
}
