package volumes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodelet/nodelet/test/testkit"
)

// readVisible reads a volume file and checks it is a link into ..data.
func readVisible(t *testing.T, dir, name string) string {
	t.Helper()
	top, _, _ := strings.Cut(name, "/")
	if target, err := os.Readlink(filepath.Join(dir, top)); err != nil || target != "..data/"+top {
		t.Fatalf("%s -> %q (%v), want a link to ..data/%s", top, target, err, top)
	}
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func dataDir(t *testing.T, dir string) string {
	t.Helper()
	ts, err := os.Readlink(filepath.Join(dir, dataDirName))
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// checkNoMountsBelow fails if anything is mounted on or below dir.
func checkNoMountsBelow(t *testing.T, dir string) {
	t.Helper()
	all, err := readMounts()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range all {
		if e.Point == dir || strings.HasPrefix(e.Point, dir+"/") {
			t.Fatalf("still mounted: %s", e.Point)
		}
	}
}

func TestSecretVolumeOnTmpfs(t *testing.T) {
	testkit.RequireRoot(t, "sets volumes up: mounts, ownership, device nodes")
	ctx := context.Background()
	src := newFakeSources()
	src.setSecret("ns", "s", map[string]string{"token": "abc", "other": "x"})
	m, _ := newManagerCfg(t, Config{Sources: src, NodeAllocatableMemory: resource.MustParse("64Mi")})
	pod := testPod("uid-sec", corev1.Volume{Name: "sec", VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: "s", DefaultMode: i32(0o400)}}})

	mounts, err := m.SetupPod(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	dir := mounts["sec"].HostPath
	if !mounts["sec"].ReadOnly || !strings.HasSuffix(dir, "pods/uid-sec/volumes/kubernetes.io~secret/sec") {
		t.Fatalf("mount = %+v, want a read-only secret volume", mounts["sec"])
	}
	got := mountsOn(t, dir)
	if len(got) != 1 || got[0].FSType != "tmpfs" || !hasOption(got[0].SuperOptions, "size=65536k") || !hasOption(got[0].Options, "nodev") {
		t.Fatalf("mounts on %s = %+v, want one 64Mi tmpfs", dir, got)
	}
	if v := readVisible(t, dir, "token"); v != "abc" {
		t.Fatalf("token = %q", v)
	}
	if fi, err := os.Stat(filepath.Join(dir, "token")); err != nil || fi.Mode().Perm() != 0o400 {
		t.Fatalf("token mode: %v %v, want 0400", fi, err)
	}

	// Unchanged: UpdatePod leaves the data directory alone.
	ts := dataDir(t, dir)
	if err := m.UpdatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if dataDir(t, dir) != ts {
		t.Fatal("UpdatePod rewrote an unchanged secret")
	}

	// Changed: new content, the removed key's file is gone.
	src.setSecret("ns", "s", map[string]string{"token": "def"})
	if err := m.UpdatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if v := readVisible(t, dir, "token"); v != "def" || dataDir(t, dir) == ts {
		t.Fatalf("after update token = %q, ..data %s (was %s)", v, dataDir(t, dir), ts)
	}
	if _, err := os.Lstat(filepath.Join(dir, "other")); !os.IsNotExist(err) {
		t.Fatalf("removed key still visible: %v", err)
	}

	checkSecretGoneAndRemount(t, m, src, pod, dir)
	for range 2 {
		if err := m.TeardownPod(ctx, pod.UID); err != nil {
			t.Fatal(err)
		}
	}
	checkNoMountsBelow(t, m.PodDir(pod.UID))
	if _, err := os.Stat(m.PodDir(pod.UID)); !os.IsNotExist(err) {
		t.Fatalf("pod dir left: %v", err)
	}
}

// checkSecretGoneAndRemount: a secret that is gone fails the update and
// keeps the content; a tmpfs that went away (a reboot) is mounted again.
func checkSecretGoneAndRemount(t *testing.T, m *Manager, src *fakeSources, pod *corev1.Pod, dir string) {
	t.Helper()
	ctx := context.Background()
	delete(src.secrets, "ns/s")
	err := m.UpdatePod(ctx, pod)
	var ve *VolumeError
	if !errors.As(err, &ve) || ve.Op != "update" || ve.Volume != "sec" || !apierrors.IsNotFound(err) {
		t.Fatalf("UpdatePod with the secret gone: %v", err)
	}
	if v := readVisible(t, dir, "token"); v != "def" {
		t.Fatalf("token after failed update = %q", v)
	}

	// The tmpfs went away (a reboot): the next update mounts and writes again.
	src.setSecret("ns", "s", map[string]string{"token": "ghi"})
	if err := unix.Unmount(dir, 0); err != nil {
		t.Fatal(err)
	}
	if err := m.UpdatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if n := len(mountsOn(t, dir)); n != 1 || readVisible(t, dir, "token") != "ghi" {
		t.Fatalf("after remount: %d mounts, token %q", n, readVisible(t, dir, "token"))
	}

}

func TestConfigMapDownwardProjectedUpdate(t *testing.T) {
	testkit.RequireRoot(t, "sets volumes up: mounts, ownership, device nodes")
	ctx := context.Background()
	src := newFakeSources()
	src.setConfigMap("ns", "cm", map[string]string{"a": "1", "b": "2"})
	alloc := corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
	m, _ := newManagerCfg(t, Config{Sources: src, NodeAllocatable: func() corev1.ResourceList { return alloc }})
	labels := corev1.DownwardAPIVolumeFile{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}}
	mem := corev1.DownwardAPIVolumeFile{Path: "mem", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "c", Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}
	pod := testPod("uid-cdp",
		corev1.Volume{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Items: []corev1.KeyToPath{{Key: "a", Path: "dir/a.conf"}}}}},
		corev1.Volume{Name: "opt", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}, Optional: ptr(true)}}},
		corev1.Volume{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
			Items: []corev1.DownwardAPIVolumeFile{labels, mem}}}},
		corev1.Volume{Name: "all", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{labels}}}}}}})
	pod.Labels = map[string]string{"v": "1"}

	mounts, err := m.SetupPod(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	for name, mnt := range mounts {
		if !mnt.ReadOnly {
			t.Errorf("volume %s is not read-only", name)
		}
	}
	cfg, info, all := mounts["cfg"].HostPath, mounts["info"].HostPath, mounts["all"].HostPath
	if len(mountsOn(t, cfg)) != 0 || len(mountsOn(t, info)) != 0 || len(mountsOn(t, all)) != 1 {
		t.Fatal("configMap and downwardAPI volumes belong on disk, projected ones on a tmpfs")
	}
	if readVisible(t, cfg, "dir/a.conf") != "1" || readVisible(t, info, "labels") != `v="1"` ||
		readVisible(t, info, "mem") != "1024" || readVisible(t, all, "b") != "2" || readVisible(t, all, "labels") != `v="1"` {
		t.Fatal("wrong initial content")
	}
	if entries, err := os.ReadDir(mounts["opt"].HostPath); err != nil || len(entries) != 2 { // ..data and its directory
		t.Fatalf("optional missing configMap: %v %v, want an empty volume", entries, err)
	}

	// New labels and data; a volume added to the spec is SetupPod's job.
	pod.Labels = map[string]string{"v": "2"}
	src.setConfigMap("ns", "cm", map[string]string{"a": "10", "b": "20"})
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "late", VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}})
	if err := m.UpdatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if readVisible(t, cfg, "dir/a.conf") != "10" || readVisible(t, info, "labels") != `v="2"` ||
		readVisible(t, all, "b") != "20" || readVisible(t, all, "labels") != `v="2"` {
		t.Fatal("UpdatePod did not refresh the content")
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(cfg), "late")); !os.IsNotExist(err) {
		t.Fatalf("UpdatePod set up a new volume: %v", err)
	}
	if err := m.TeardownPod(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
	checkNoMountsBelow(t, m.PodDir(pod.UID))
}

func TestProjectionSetupFailures(t *testing.T) {
	testkit.RequireRoot(t, "sets volumes up: mounts, ownership, device nodes")
	ctx := context.Background()
	m, _ := newManagerCfg(t, Config{Sources: newFakeSources()})
	pod := testPod("uid-fail", corev1.Volume{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "missing"}}}})
	_, err := m.SetupPod(ctx, pod)
	var ve *VolumeError
	if !errors.As(err, &ve) || ve.Op != "set up" || ve.Volume != "cfg" || !apierrors.IsNotFound(err) {
		t.Fatalf("missing configMap: err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(m.volumesDir(pod.UID), "kubernetes.io~configmap", "cfg")); !os.IsNotExist(err) {
		t.Fatalf("a failed volume left its directory: %v", err)
	}

	pod = testPod("uid-fail", corev1.Volume{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{Path: "ca"}}}}}})
	_, err = m.SetupPod(ctx, pod)
	var ue *UnsupportedError
	if !errors.As(err, &ue) || !errors.As(err, &ve) || ve.Volume != "kube-api-access" {
		t.Fatalf("clusterTrustBundle: err = %v, want an UnsupportedError in a VolumeError", err)
	}
	if !strings.Contains(err.Error(), "cluster trust bundles are not served by this cluster yet") {
		t.Fatalf("message %q does not say why", err)
	}
	if err := m.TeardownPod(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
	checkNoMountsBelow(t, m.PodDir(pod.UID))
}
