package volumes

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VolumeStats reports what was set up: an emptyDir by du, a local
// PersistentVolume by statfs with its claim, nothing for hostPath; a torn
// down pod no longer.
func TestVolumeStats(t *testing.T) {
	local := t.TempDir()
	claims := fakeClaims{claims: map[string]*corev1.PersistentVolumeClaim{
		"ns/data": {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data", UID: "uid-c"},
			Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv"}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}},
	}, volumes: map[string]*corev1.PersistentVolume{
		"pv": {ObjectMeta: metav1.ObjectMeta{Name: "pv"}, Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: local}},
			ClaimRef:               &corev1.ObjectReference{Namespace: "ns", Name: "data", UID: "uid-c"}}},
	}}
	m, _ := newManagerCfg(t, Config{Claims: claims})
	pod := testPod("0f1e2d3c-0000-4000-8000-000000000002",
		corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		corev1.Volume{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: t.TempDir()}}},
		corev1.Volume{Name: "claim", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}})
	ctx := context.Background()
	mounts, err := m.SetupPod(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mounts["scratch"].HostPath, "f"), make([]byte, 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	all, err := m.VolumeStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for i, v := range all[pod.UID] {
		got[v.Name] = i
	}
	if len(all) != 1 || len(got) != 2 {
		t.Fatalf("stats of %v, want scratch and claim of one pod", all)
	}
	scratch, claim := all[pod.UID][got["scratch"]], all[pod.UID][got["claim"]]
	if *scratch.UsedBytes < 64<<10 || *scratch.InodesUsed != 2 || *scratch.CapacityBytes == 0 || scratch.PVCRef != nil {
		t.Errorf("emptyDir: used %d bytes %d inodes, capacity %d, claim %v", *scratch.UsedBytes, *scratch.InodesUsed, *scratch.CapacityBytes, scratch.PVCRef)
	}
	if claim.PVCRef == nil || claim.PVCRef.Name != "data" || claim.PVCRef.Namespace != "ns" || *claim.CapacityBytes == 0 ||
		*claim.UsedBytes+*claim.AvailableBytes > *claim.CapacityBytes {
		t.Errorf("claim volume: %+v", claim)
	}
	if err := m.TeardownPod(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
	if all, err := m.VolumeStats(ctx); err != nil || len(all) != 0 {
		t.Errorf("after teardown: %v, %v", all, err)
	}
}
