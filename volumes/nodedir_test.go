package volumes

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodelet/nodelet/test/testkit"
)

func TestEnsureNodeDir(t *testing.T) {
	old := unix.Umask(0)
	defer unix.Umask(old)
	base := t.TempDir()
	perm := func(p string) os.FileMode {
		t.Helper()
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode().Perm()
	}
	fresh := filepath.Join(base, "a", "b")
	if err := EnsureNodeDir(fresh); err != nil {
		t.Fatal(err)
	}
	if perm(fresh) != 0o750 || perm(filepath.Dir(fresh)) != 0o750 {
		t.Fatalf("new dirs: %v and %v, want 0750", perm(filepath.Dir(fresh)), perm(fresh))
	}
	for _, c := range []struct{ had, want os.FileMode }{{0o755, 0o750}, {0o777, 0o750}, {0o700, 0o700}, {0o710, 0o710}} {
		d := filepath.Join(base, "old-"+c.had.String())
		if err := os.Mkdir(d, c.had); err != nil {
			t.Fatal(err)
		}
		if err := EnsureNodeDir(d); err != nil {
			t.Fatal(err)
		}
		if got := perm(d); got != c.want {
			t.Errorf("dir of %v: %v, want %v", c.had, got, c.want)
		}
	}
	f := filepath.Join(base, "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := EnsureNodeDir(f); err == nil {
		t.Fatal("a file taken for a directory")
	}
}

// othersReach reports whether a user who is neither the owner nor in the
// group of any directory from root down to path can walk to path (the
// execute bit for others on every directory on the way).
func othersReach(t *testing.T, root, path string) bool {
	t.Helper()
	rel, err := filepath.Rel(root, path)
	if err != nil || strings.HasPrefix(rel, "..") {
		t.Fatalf("%s is not below %s", path, root)
	}
	dir := root
	for _, part := range strings.Split(filepath.Dir(rel), string(filepath.Separator)) {
		dir = filepath.Join(dir, part)
		fi, err := os.Lstat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return false
		}
	}
	return true
}

// TestPodDirsNotReadableByOthers: the directories on the way to a pod's
// secret, projected and emptyDir volumes are 0750, so another local user
// reaches none of them; the volumes' own roots keep the modes containers
// need (0755 read-only projections, 0777 emptyDirs).
func TestPodDirsNotReadableByOthers(t *testing.T) {
	testkit.RequireRoot(t, "sets volumes up: mounts, ownership, device nodes")
	old := unix.Umask(0o022)
	defer unix.Umask(old)
	src := newFakeSources()
	src.setSecret("ns", "s", map[string]string{"token": "abc"})
	m, root := newManagerCfg(t, Config{Sources: src, NodeAllocatableMemory: resource.MustParse("64Mi")})
	pod := testPod("uid-modes",
		corev1.Volume{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}},
		corev1.Volume{Name: "proj", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}}}}}}},
		corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	mounts, err := m.SetupPod(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	defer m.TeardownPod(context.Background(), pod.UID)
	for _, d := range []string{"pods", "pods/uid-modes", "pods/uid-modes/volumes",
		"pods/uid-modes/volumes/kubernetes.io~secret", "pods/uid-modes/volumes/kubernetes.io~projected",
		"pods/uid-modes/volumes/kubernetes.io~empty-dir"} {
		fi, err := os.Stat(filepath.Join(root, d))
		if err != nil || fi.Mode().Perm() != NodeDirPerm {
			t.Errorf("%s: %v (%v), want %v", d, fi.Mode(), err, NodeDirPerm)
		}
	}
	for name, want := range map[string]os.FileMode{"sec": 0o755, "proj": 0o755, "scratch": 0o777} {
		dir := mounts[name].HostPath
		fi, err := os.Stat(dir)
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("volume %s root: %v (%v), want %v", name, fi.Mode(), err, want)
		}
		if othersReach(t, root, filepath.Join(dir, "token")) {
			t.Errorf("another user reaches %s", dir)
		}
	}
	if got := mountsOn(t, mounts["proj"].HostPath); len(got) != 1 || got[0].FSType != "tmpfs" {
		t.Errorf("projected volume mounts: %+v, want a tmpfs", got)
	}
}
