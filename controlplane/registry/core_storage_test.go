package registry

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

func newClaim() *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data-web-0", Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			},
		},
	}
}

func TestPersistentVolumeClaims(t *testing.T) {
	runWorkloadCases(t, []workloadCase{{
		resource: "persistentvolumeclaims",
		valid:    func() runtime.Object { return newClaim() },
		breakIt: func(o runtime.Object) {
			pvc := o.(*corev1.PersistentVolumeClaim)
			pvc.Spec.AccessModes = nil
			pvc.Spec.Resources.Requests = nil
		},
		want: []string{"FieldValueRequired spec.accessModes", "FieldValueRequired spec.resources[storage]"},
		defaulted: func(o runtime.Object) string {
			if ptr.Deref(o.(*corev1.PersistentVolumeClaim).Spec.VolumeMode, "") != corev1.PersistentVolumeFilesystem {
				return "volumeMode"
			}
			return ""
		},
	}})
}

// TestClaimStatusSplit: upstream resets the status on create, keeps it on
// updates of the claim and keeps the spec on status updates; it tracks no
// generation for claims.
func TestClaimStatusSplit(t *testing.T) {
	r := resourceByName(t, "persistentvolumeclaims")
	if r.TrackGeneration {
		t.Errorf("claims track their generation; upstream's do not")
	}
	pvc := newClaim()
	pvc.Status.Phase = corev1.ClaimBound
	pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	r.PrepareForCreate(pvc)
	if pvc.Status.Phase != corev1.ClaimPending || pvc.Status.Capacity != nil {
		t.Errorf("create kept the status or is not Pending: %+v", pvc.Status)
	}
	old := newClaim()
	r.Default(old)
	old.ResourceVersion = "7"
	old.Status.Phase = corev1.ClaimPending
	upd := old.DeepCopy()
	upd.Status.Phase = ""
	upd.Labels = map[string]string{"a": "b"}
	r.PrepareForUpdate(upd, old)
	if upd.Status.Phase != corev1.ClaimPending {
		t.Errorf("update dropped the status")
	}
	if errs := r.ValidateUpdate(upd, old); len(errs) > 0 {
		t.Errorf("update: %v", errs.ToAggregate())
	}
	st := old.DeepCopy()
	st.Spec.VolumeName = "pv-1"
	st.Status.Phase = corev1.ClaimBound
	r.PrepareForStatusUpdate(st, old)
	if st.Spec.VolumeName != "" || st.Status.Phase != corev1.ClaimBound {
		t.Errorf("status update: volumeName %q, phase %q", st.Spec.VolumeName, st.Status.Phase)
	}
	if errs := r.ValidateStatusUpdate(st, old); len(errs) > 0 {
		t.Errorf("status update: %v", errs.ToAggregate())
	}
}

func TestClaimDataSources(t *testing.T) {
	r := resourceByName(t, "persistentvolumeclaims")
	pvc := newClaim()
	pvc.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "src"}
	r.PrepareForCreate(pvc)
	if ref := pvc.Spec.DataSourceRef; ref == nil || ref.Kind != "PersistentVolumeClaim" || ref.Name != "src" {
		t.Errorf("dataSourceRef = %+v, want the claim src", ref)
	}
	other := newClaim()
	other.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "Secret", Name: "s"}
	r.PrepareForCreate(other)
	if other.Spec.DataSource != nil || other.Spec.DataSourceRef != nil {
		t.Errorf("a secret data source is kept: %+v %+v", other.Spec.DataSource, other.Spec.DataSourceRef)
	}
}

func TestClaimRow(t *testing.T) {
	now := time.Date(2025, 1, 3, 13, 0, 0, 0, time.UTC)
	pvc := newClaim()
	pvc.CreationTimestamp = metav1.NewTime(now.Add(-2 * time.Hour))
	pvc.Spec.StorageClassName = ptr.To("local")
	pvc.Status.Phase = corev1.ClaimPending
	want := []interface{}{"data-web-0", "Pending", "", "", "", "local", "<unset>", "120m", "<unset>"}
	if got := persistentVolumeClaimRow(pvc, now); !reflect.DeepEqual(got, want) {
		t.Errorf("pending row = %v\nwant %v", got, want)
	}
	pvc.Spec.VolumeName = "pv-1"
	pvc.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeFilesystem)
	pvc.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound,
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany, corev1.ReadWriteOnce},
		Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}}
	want = []interface{}{"data-web-0", "Bound", "pv-1", "2Gi", "RWO,RWX", "local", "<unset>", "120m", "Filesystem"}
	if got := persistentVolumeClaimRow(pvc, now); !reflect.DeepEqual(got, want) {
		t.Errorf("bound row = %v\nwant %v", got, want)
	}
}
