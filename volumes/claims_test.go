package volumes

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/localpath"
)

type fakeClaims struct {
	claims  map[string]*corev1.PersistentVolumeClaim
	volumes map[string]*corev1.PersistentVolume
}

func (f fakeClaims) PersistentVolumeClaim(_ context.Context, ns, name string) (*corev1.PersistentVolumeClaim, error) {
	if c, ok := f.claims[ns+"/"+name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "persistentvolumeclaims"}, name)
}

func (f fakeClaims) PersistentVolume(_ context.Context, name string) (*corev1.PersistentVolume, error) {
	if v, ok := f.volumes[name]; ok {
		return v, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "persistentvolumes"}, name)
}

// TestClaimVolumes: a bound claim mounts its hostPath or local volume's
// path (the built-in provisioner's directory created on first use); an
// unbound claim, a volume bound elsewhere or of another kind is refused.
func TestClaimVolumes(t *testing.T) {
	dir := t.TempDir()
	claim := func(name, volume string, phase corev1.PersistentVolumeClaimPhase) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-c-" + name)},
			Spec: corev1.PersistentVolumeClaimSpec{VolumeName: volume}, Status: corev1.PersistentVolumeClaimStatus{Phase: phase}}
	}
	bound := func(name, claim string, src corev1.PersistentVolumeSource, ann map[string]string) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann},
			Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: src,
				ClaimRef: &corev1.ObjectReference{Namespace: "default", Name: claim, UID: types.UID("uid-c-" + claim)}}}
	}
	dirType := corev1.HostPathDirectory
	f := fakeClaims{claims: map[string]*corev1.PersistentVolumeClaim{
		"default/static":  claim("static", "pv-static", corev1.ClaimBound),
		"default/local":   claim("local", "pv-local", corev1.ClaimBound),
		"default/missing": claim("missing", "pv-missing-dir", corev1.ClaimBound),
		"default/pending": claim("pending", "", corev1.ClaimPending),
		"default/stolen":  claim("stolen", "pv-static", corev1.ClaimBound),
		"default/nfs":     claim("nfs", "pv-nfs", corev1.ClaimBound),
	}, volumes: map[string]*corev1.PersistentVolume{
		"pv-static": bound("pv-static", "static", corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &dirType}}, nil),
		"pv-local": bound("pv-local", "local", corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: filepath.Join(dir, "provisioned")}},
			map[string]string{AnnotationProvisionedBy: localpath.Provisioner}),
		"pv-missing-dir": bound("pv-missing-dir", "missing", corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: filepath.Join(dir, "nope")}}, nil),
		"pv-nfs":         bound("pv-nfs", "nfs", corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "x", Path: "/"}}, nil),
	}}
	p := claimPlugin{claims: f}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p"}}
	vol := func(claim string, ro bool) *corev1.Volume {
		return &corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim, ReadOnly: ro}}}
	}
	ctx := context.Background()
	if m, err := p.setup(ctx, pod, vol("static", true), ""); err != nil || m.HostPath != dir || !m.ReadOnly {
		t.Errorf("static hostPath claim: %+v, %v", m, err)
	}
	m, err := p.setup(ctx, pod, vol("local", false), "")
	if err != nil || m.HostPath != filepath.Join(dir, "provisioned") || m.ReadOnly {
		t.Errorf("provisioned local claim: %+v, %v", m, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "provisioned")); err != nil || !fi.IsDir() {
		t.Errorf("the provisioned directory was not created: %v", err)
	}
	for claim, want := range map[string]string{
		"missing": "is not a directory",
		"pending": "is not bound",
		"stolen":  "is not bound to claim default/stolen",
		"nfs":     "only hostPath, local and CSI volumes",
		"gone":    "not found",
	} {
		if _, err := p.setup(ctx, pod, vol(claim, false), ""); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("claim %s: %v, want an error with %q", claim, err, want)
		}
	}
	// A generic ephemeral volume uses the claim POD-VOLUME the pod owns.
	eph := &corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}}
	owned := claim("p-scratch", "pv-static", corev1.ClaimBound)
	owned.UID = "uid-c-static" // the volume's claimRef
	f.claims["default/p-scratch"] = owned
	if _, err := p.setup(ctx, pod, eph, ""); err == nil || !strings.Contains(err.Error(), "pod is not owner") {
		t.Errorf("an ephemeral claim the pod does not own: %v", err)
	}
	pod.UID = "uid-pod"
	isController := true
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "uid-pod", Controller: &isController}}
	if m, err := p.setup(ctx, pod, eph, ""); err != nil || m.HostPath != dir {
		t.Errorf("the pod's ephemeral claim: %+v, %v", m, err)
	}
	if _, err := (claimPlugin{}).setup(ctx, pod, vol("static", false), ""); err == nil {
		t.Error("a manager without Claims mounted a claim")
	}
}
