package volumes

import (
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCSINames: the names and paths upstream derives (checked against
// sha256sum of the same strings).
func TestCSINames(t *testing.T) {
	if got, want := AttachmentName("vol-1", "hostpath.csi.k8s.io", "node-a"),
		"csi-5a70c5de395ccad5e79daeb27c7c4f2634b675e6e1bb2a397999a016143bc9fb"; got != want {
		t.Errorf("AttachmentName = %s, want %s", got, want)
	}
	if got, want := CSIStagingDir("/var/lib/nodelet", "hostpath.csi.k8s.io", "vol-1"),
		"/var/lib/nodelet/plugins/kubernetes.io/csi/hostpath.csi.k8s.io/d2e8363faaac7ae76def3b14091d8eb5755f6b92e9531627aeec833a8731cc49"; got != want {
		t.Errorf("CSIStagingDir = %s, want %s", got, want)
	}
	if got, want := csiEphemeralHandle("uid-1", "data"), "csi-d6e418cffb6079f9b02d83af7dffbf3511ed5a26b3f106f1f3ca764ed6505c9c"; got != want {
		t.Errorf("csiEphemeralHandle = %s, want %s", got, want)
	}
	if got := CSIUniqueVolumeName("d.csi", "h1"); got != "kubernetes.io/csi/d.csi^h1" {
		t.Errorf("CSIUniqueVolumeName = %s", got)
	}
}

func TestCSIAccessMode(t *testing.T) {
	for _, tc := range []struct {
		m     corev1.PersistentVolumeAccessMode
		multi bool
		want  csipb.VolumeCapability_AccessMode_Mode
	}{
		{corev1.ReadWriteOnce, false, csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		{corev1.ReadWriteOnce, true, csipb.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER},
		{corev1.ReadWriteOncePod, false, csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		{corev1.ReadWriteOncePod, true, csipb.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER},
		{corev1.ReadOnlyMany, false, csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY},
		{corev1.ReadWriteMany, false, csipb.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
	} {
		if got := csiAccessMode(tc.m, tc.multi); got != tc.want {
			t.Errorf("csiAccessMode(%s, %v) = %s, want %s", tc.m, tc.multi, got, tc.want)
		}
	}
}

func TestCSIFSGroupApplies(t *testing.T) {
	policy := func(p storagev1.FSGroupPolicy) storagev1.CSIDriverSpec {
		return storagev1.CSIDriverSpec{FSGroupPolicy: &p}
	}
	rwo := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	rwx := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	for _, tc := range []struct {
		name string
		v    csiVolume
		spec storagev1.CSIDriverSpec
		want bool
	}{
		{"File always", csiVolume{mode: csiModeEphemeral}, policy(storagev1.FileFSGroupPolicy), true},
		{"None never", csiVolume{fsType: "ext4", accessModes: rwo}, policy(storagev1.NoneFSGroupPolicy), false},
		{"read-only never", csiVolume{readOnly: true}, policy(storagev1.FileFSGroupPolicy), false},
		{"RWO with fsType", csiVolume{mode: csiModePersistent, fsType: "ext4", accessModes: rwo}, policy(storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy), true},
		{"RWO without fsType", csiVolume{mode: csiModePersistent, accessModes: rwo}, policy(storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy), false},
		{"RWX", csiVolume{mode: csiModePersistent, fsType: "ext4", accessModes: rwx}, policy(storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy), false},
		{"inline", csiVolume{mode: csiModeEphemeral, fsType: "ext4", accessModes: rwo}, policy(storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy), false},
	} {
		if got := csiFSGroupApplies(tc.v, tc.spec); got != tc.want {
			t.Errorf("%s: csiFSGroupApplies = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestCSIVolumeContext: pod information only with podInfoOnMount, and
// the volume's attributes are not changed in place.
func TestCSIVolumeContext(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u"}, Spec: corev1.PodSpec{ServiceAccountName: "sa"}}
	attrs := map[string]string{"k": "v"}
	v := csiVolume{mode: csiModeEphemeral, attributes: attrs}
	if got := volumeContext(v, storagev1.CSIDriverSpec{}, pod); len(got) != 1 {
		t.Errorf("without podInfoOnMount: %v", got)
	}
	yes := true
	got := volumeContext(v, storagev1.CSIDriverSpec{PodInfoOnMount: &yes}, pod)
	want := map[string]string{"k": "v", csiPodName: "p", csiPodNamespace: "ns", csiPodUID: "u", csiServiceAccount: "sa", csiEphemeral: "true"}
	if len(got) != len(want) {
		t.Fatalf("volumeContext = %v, want %v", got, want)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("volumeContext[%s] = %q, want %q", k, got[k], w)
		}
	}
	if len(attrs) != 1 {
		t.Errorf("attributes changed: %v", attrs)
	}
}

// TestCSILifecycleMode: a driver without a CSIDriver (defaults) takes
// persistent volumes only; inline volumes need Ephemeral listed.
func TestCSILifecycleMode(t *testing.T) {
	p := &csiPlugin{}
	spec, err := p.driverSpec(t.Context(), "d")
	if err != nil {
		t.Fatal(err)
	}
	if err := checkLifecycleMode("d", spec, csiModePersistent); err != nil {
		t.Error(err)
	}
	if err := checkLifecycleMode("d", spec, csiModeEphemeral); err == nil {
		t.Error("inline volume accepted without a CSIDriver allowing Ephemeral")
	}
	eph := storagev1.CSIDriverSpec{VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecycleEphemeral}}
	if err := checkLifecycleMode("d", eph, csiModeEphemeral); err != nil {
		t.Error(err)
	}
}
