package registry

import (
	"time"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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
