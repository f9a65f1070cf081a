package registry

import (
	"strings"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// volumeAttachmentResource serves storage.k8s.io/v1 VolumeAttachments
// (which attacher should attach which volume to which node) as upstream's
// strategy does: status reset on create and kept on update, the spec kept
// on status updates. Nothing attaches volumes yet; the Node authorizer
// follows them to let a node read the volumes attached to it.
func volumeAttachmentResource() *Resource {
	return &Resource{
		GroupVersion: storagev1.SchemeGroupVersion,
		Name:         "volumeattachments",
		Kind:         "VolumeAttachment",
		ListKind:     "VolumeAttachmentList",
		Verbs:        allVerbs(),
		New:          func() runtime.Object { return &storagev1.VolumeAttachment{} },
		NewList:      func() runtime.Object { return &storagev1.VolumeAttachmentList{} },
		Subresources: []string{"status"},

		PrepareForCreate: mutate(func(va *storagev1.VolumeAttachment) { va.Status = storagev1.VolumeAttachmentStatus{} }),
		PrepareForUpdate: mutate2(func(va, old *storagev1.VolumeAttachment) { va.Status = *old.Status.DeepCopy() }),
		PrepareForStatusUpdate: mutate2(func(va, old *storagev1.VolumeAttachment) {
			va.Spec = *old.Spec.DeepCopy()
			keepMetaForStatus(&va.ObjectMeta, &old.ObjectMeta)
		}),

		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			{Name: "Attacher", Type: "string", Format: "name", Description: storagev1.VolumeAttachmentSpec{}.SwaggerDoc()["attacher"]},
			{Name: "PV", Type: "string", Description: storagev1.VolumeAttachmentSource{}.SwaggerDoc()["persistentVolumeName"]},
			{Name: "Node", Type: "string", Description: storagev1.VolumeAttachmentSpec{}.SwaggerDoc()["nodeName"]},
			{Name: "Attached", Type: "boolean", Description: storagev1.VolumeAttachmentStatus{}.SwaggerDoc()["attached"]},
			ageColumn(),
		},
		Row: row(func(va *storagev1.VolumeAttachment, now time.Time) []interface{} {
			pv := ""
			if va.Spec.Source.PersistentVolumeName != nil {
				pv = *va.Spec.Source.PersistentVolumeName
			}
			return []interface{}{va.Name, va.Spec.Attacher, pv, va.Spec.NodeName, va.Status.Attached, age(va.CreationTimestamp, now)}
		}),
	}
}

// csiDriverResource serves storage.k8s.io/v1 CSIDrivers: what a CSI
// driver needs of the node (attachment, pod info, token audiences).
// NodeRestriction reads them to check the audiences of a node's token
// requests. A spec change bumps the generation, as upstream's strategy
// does (which starts at what the client sent rather than 1).
func csiDriverResource() *Resource {
	spec := storagev1.CSIDriverSpec{}.SwaggerDoc()
	return &Resource{
		GroupVersion:    storagev1.SchemeGroupVersion,
		Name:            "csidrivers",
		Kind:            "CSIDriver",
		ListKind:        "CSIDriverList",
		Verbs:           allVerbs(),
		New:             func() runtime.Object { return &storagev1.CSIDriver{} },
		NewList:         func() runtime.Object { return &storagev1.CSIDriverList{} },
		TrackGeneration: true,
		SpecChanged: changed(func(d, old *storagev1.CSIDriver) bool {
			return !apiequality.Semantic.DeepEqual(d.Spec, old.Spec)
		}),
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			{Name: "AttachRequired", Type: "boolean", Description: spec["attachRequired"]},
			{Name: "PodInfoOnMount", Type: "boolean", Description: spec["podInfoOnMount"]},
			{Name: "StorageCapacity", Type: "boolean", Description: spec["storageCapacity"]},
			{Name: "TokenRequests", Type: "string", Description: spec["tokenRequests"]},
			{Name: "RequiresRepublish", Type: "boolean", Description: spec["requiresRepublish"]},
			{Name: "Modes", Type: "string", Description: spec["volumeLifecycleModes"]},
			ageColumn(),
		},
		Row: row(csiDriverRow),
	}
}

// csiDriverRow is upstream's printCSIDriver.
func csiDriverRow(d *storagev1.CSIDriver, now time.Time) []interface{} {
	modes := make([]string, 0, len(d.Spec.VolumeLifecycleModes))
	for _, m := range d.Spec.VolumeLifecycleModes {
		modes = append(modes, string(m))
	}
	modesCell := strings.Join(modes, ",")
	if modesCell == "" {
		modesCell = "<none>"
	}
	tokens := "<unset>"
	if d.Spec.TokenRequests != nil {
		audiences := make([]string, 0, len(d.Spec.TokenRequests))
		for _, t := range d.Spec.TokenRequests {
			audiences = append(audiences, t.Audience)
		}
		tokens = strings.Join(audiences, ",")
	}
	return []interface{}{d.Name, ptr.Deref(d.Spec.AttachRequired, true), ptr.Deref(d.Spec.PodInfoOnMount, false),
		ptr.Deref(d.Spec.StorageCapacity, false), tokens, ptr.Deref(d.Spec.RequiresRepublish, false), modesCell,
		age(d.CreationTimestamp, now)}
}
