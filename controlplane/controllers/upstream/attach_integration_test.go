package upstream

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/test/testkit"
)

// The attach/detach controller creates the VolumeAttachment of a CSI
// volume whose driver requires attaching, for a pod on a node that lets
// it manage attachment, and deletes it when the pod is gone; a driver
// without attaching gets none.
func TestAttachDetachController(t *testing.T) {
	cs := start(t)
	ctx := context.Background()
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1",
		Annotations: map[string]string{"volumes.kubernetes.io/controller-managed-attach-detach": "true"}}}, metav1.CreateOptions{}))
	must(cs.StorageV1().CSIDrivers().Create(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "attach.example.com"},
		Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(true)}}, metav1.CreateOptions{}))
	must(cs.StorageV1().CSIDrivers().Create(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "plain.example.com"},
		Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)}}, metav1.CreateOptions{}))
	for _, driver := range []string{"attach", "plain"} {
		bindCSIClaim(t, cs, driver, driver+".example.com")
		must(cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: driver},
			Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
				Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: driver}}}}}}, metav1.CreateOptions{}))
	}
	var name string
	testkit.Eventually(t, 30*time.Second, "a VolumeAttachment for the attaching driver", func() bool {
		list, err := cs.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != 1 {
			return false
		}
		va := list.Items[0]
		name = va.Name
		return va.Spec.Attacher == "attach.example.com" && va.Spec.NodeName == "n1" &&
			ptr.Deref(va.Spec.Source.PersistentVolumeName, "") == "attach"
	})
	time.Sleep(time.Second)
	if list, err := cs.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{}); err != nil || len(list.Items) != 1 {
		t.Fatalf("VolumeAttachments %v, %v: want only the attaching driver's", list, err)
	}
	// The driver's external-attacher would report it attached.
	va, err := cs.StorageV1().VolumeAttachments().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	va.Status.Attached = true
	must(cs.StorageV1().VolumeAttachments().UpdateStatus(ctx, va, metav1.UpdateOptions{}))
	if err := cs.CoreV1().Pods("default").Delete(ctx, "attach", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 60*time.Second, "the VolumeAttachment deleted with the pod", func() bool {
		list, err := cs.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0
	})
}

// bindCSIClaim makes a CSI volume of driver and a claim bound to it, both
// named name, of no class.
func bindCSIClaim(t *testing.T, cs kubernetes.Interface, name, driver string) {
	t.Helper()
	bindCSIClaimOfClass(t, cs, name, driver, "")
}

// bindCSIClaimOfClass is bindCSIClaim with the class named class.
func bindCSIClaimOfClass(t *testing.T, cs kubernetes.Interface, name, driver, class string) {
	t.Helper()
	ctx := context.Background()
	size := resource.MustParse("1Gi")
	pv, err := cs.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: "vol-" + name}},
			StorageClassName:       class,
			ClaimRef:               &corev1.ObjectReference{Namespace: "default", Name: name}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = cs.CoreV1().PersistentVolumeClaims("default").Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: pv.Name, StorageClassName: ptr.To(class),
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "claim "+name+" Bound", func() bool {
		c, err := cs.CoreV1().PersistentVolumeClaims("default").Get(ctx, name, metav1.GetOptions{})
		return err == nil && c.Status.Phase == corev1.ClaimBound
	})
}

// The expand controller leaves a CSI claim's growth to the driver's
// external-resizer and says so on the claim, as upstream.
func TestExpandControllerHandsCSIToResizer(t *testing.T) {
	cs := start(t)
	ctx := context.Background()
	if _, err := cs.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "growing"},
		Provisioner: "grow.example.com", AllowVolumeExpansion: ptr.To(true)}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bindCSIClaimOfClass(t, cs, "grow", "grow.example.com", "growing")
	claims := cs.CoreV1().PersistentVolumeClaims("default")
	grow := []byte(`{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}`)
	if _, err := claims.Patch(ctx, "grow", types.MergePatchType, grow, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "the ExternalExpanding event", func() bool {
		list, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=grow"})
		if err != nil {
			return false
		}
		for _, e := range list.Items {
			if e.Reason == "ExternalExpanding" && e.Message == "waiting for an external controller to expand this PVC" {
				return true
			}
		}
		return false
	})
}
