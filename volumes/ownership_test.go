package volumes

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/test/testkit"
)

func gidOf(t *testing.T, path string) int {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return int(fi.Sys().(*syscall.Stat_t).Gid)
}

func modeOf(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

// A tree gets the group everywhere, group read-write on files, group
// exec and set-group-ID on directories; a symbolic link is not followed.
func TestApplyFSGroup(t *testing.T) {
	testkit.RequireRoot(t, "changes file groups")
	dir, outside := t.TempDir(), t.TempDir()
	sub := filepath.Join(dir, "sub")
	file := filepath.Join(sub, "f")
	target := filepath.Join(outside, "t")
	for _, err := range []error{os.Mkdir(sub, 0o700), os.WriteFile(file, nil, 0o600), os.WriteFile(target, nil, 0o600),
		os.Symlink(target, filepath.Join(dir, "link"))} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := applyFSGroup(dir, ptr(int64(1234)), nil); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, sub, file, filepath.Join(dir, "link")} {
		if g := gidOf(t, p); g != 1234 {
			t.Errorf("%s: group %d, want 1234", p, g)
		}
	}
	if m := modeOf(t, sub); m.Perm() != 0o770 || m&os.ModeSetgid == 0 {
		t.Errorf("directory mode %v, want drwxrws---", m)
	}
	if m := modeOf(t, file); m.Perm() != 0o660 {
		t.Errorf("file mode %v, want -rw-rw----", m)
	}
	if g, m := gidOf(t, target), modeOf(t, target); g == 1234 || m.Perm() != 0o600 {
		t.Errorf("link target changed: group %d mode %v", g, m)
	}
	// OnRootMismatch trusts a root that is done; Always walks again.
	if err := os.Lchown(file, -1, 0); err != nil {
		t.Fatal(err)
	}
	onRoot := corev1.FSGroupChangeOnRootMismatch
	if err := applyFSGroup(dir, ptr(int64(1234)), &onRoot); err != nil || gidOf(t, file) != 0 {
		t.Errorf("OnRootMismatch walked a done root: %v, group %d", err, gidOf(t, file))
	}
	always := corev1.FSGroupChangeAlways
	if err := applyFSGroup(dir, ptr(int64(1234)), &always); err != nil || gidOf(t, file) != 1234 {
		t.Errorf("Always: %v, group %d", err, gidOf(t, file))
	}
	if err := applyFSGroup(dir, ptr(int64(99)), &onRoot); err != nil || gidOf(t, file) != 99 {
		t.Errorf("OnRootMismatch with another group: %v, group %d", err, gidOf(t, file))
	}
	if err := applyFSGroup(filepath.Join(dir, "missing"), ptr(int64(1)), nil); err == nil {
		t.Error("missing dir accepted")
	}
}

// The Manager gives an emptyDir the pod's fsGroup once; a file the
// container makes afterwards is left alone at the next sync.
func TestEmptyDirFSGroup(t *testing.T) {
	testkit.RequireRoot(t, "changes file groups")
	m, _ := newManager(t)
	pod := testPod("0f1e2d3c-0000-4000-8000-000000000001", corev1.Volume{Name: "data",
		VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: ptr(int64(2000))}
	ctx := context.Background()
	mounts, err := m.SetupPod(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	dir := mounts["data"].HostPath
	if g, mode := gidOf(t, dir), modeOf(t, dir); g != 2000 || mode&os.ModeSetgid == 0 {
		t.Fatalf("emptyDir group %d mode %v, want 2000 and set-group-ID", g, mode)
	}
	late := filepath.Join(dir, "late")
	if err := os.WriteFile(late, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(late, -1, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := m.SetupPod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if g := gidOf(t, late); g != 0 {
		t.Errorf("second sync walked the volume again: group %d", g)
	}
	if err := m.TeardownPod(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
}
