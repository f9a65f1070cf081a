package volumes

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/test/testkit"
)

func TestSubPath(t *testing.T) {
	env := []string{"POD=web-0", "NS=prod", "EMPTY=", "POD=web-1"}
	cases := []struct {
		vm      corev1.VolumeMount
		want    string
		wantErr string
	}{
		{corev1.VolumeMount{Name: "v"}, "", ""},
		{corev1.VolumeMount{Name: "v", SubPath: "a/b"}, "a/b", ""},
		{corev1.VolumeMount{Name: "v", SubPathExpr: "logs/$(POD)"}, "logs/web-1", ""}, // the later entry wins
		{corev1.VolumeMount{Name: "v", SubPathExpr: "$(NS)-$(POD)"}, "prod-web-1", ""},
		{corev1.VolumeMount{Name: "v", SubPathExpr: "a$$(POD)"}, "a$(POD)", ""},
		{corev1.VolumeMount{Name: "v", SubPathExpr: "a$b$"}, "a$b$", ""},
		{corev1.VolumeMount{Name: "v", SubPathExpr: "x/$(POD"}, "x/$(POD", ""},
		{corev1.VolumeMount{Name: "v", SubPathExpr: "$(NOPE)/$(EMPTY)/$(NOPE)"}, "", "missing value for EMPTY, NOPE"},
		{corev1.VolumeMount{Name: "v", SubPath: "/etc"}, "", "must not be an absolute path"},
		{corev1.VolumeMount{Name: "v", SubPath: "a/../../etc"}, "", "must not contain '..'"},
		{corev1.VolumeMount{Name: "v", SubPathExpr: "$(NS)/../.."}, "", "must not contain '..'"},
		{corev1.VolumeMount{Name: "v", SubPath: "a", SubPathExpr: "b"}, "", "mutually exclusive"},
	}
	for _, c := range cases {
		got, err := SubPath(c.vm, env)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("SubPath(%+v) = %q, %v; want error %q", c.vm, got, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("SubPath(%+v) = %q, %v; want %q", c.vm, got, err, c.want)
		}
	}
}

// handlePath is where an O_PATH handle points.
func handlePath(t *testing.T, f *os.File) string {
	t.Helper()
	p, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// escapeFixture makes a volume with symlinks that point out of it and an
// outside directory they point at.
func escapeFixture(t *testing.T) (vol, outside string) {
	t.Helper()
	base := t.TempDir()
	vol, outside = filepath.Join(base, "vol"), filepath.Join(base, "outside")
	for _, d := range []string{filepath.Join(vol, "data"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(vol, "data/file"), []byte("in"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("out"), 0o600); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"abs": "/", "up": "../../..", "out": outside, "rel": "../outside"} {
		if err := os.Symlink(target, filepath.Join(vol, link)); err != nil {
			t.Fatal(err)
		}
	}
	return vol, outside
}

func TestOpenSubPathStaysInVolume(t *testing.T) {
	old := unix.Umask(0o077)
	defer unix.Umask(old)
	vol, outside := escapeFixture(t)
	cases := []struct{ sub, want string }{
		{"data/file", "data/file"},
		{"data", "data"},
		{"up", "."},
		{"abs", "."},
		{"abs/etc/passwd", "etc/passwd"}, // created inside the volume
		{"new/deeper", "new/deeper"},
	}
	for _, c := range cases {
		f, err := openSubPath(vol, c.sub, 0o770)
		if err != nil {
			t.Errorf("openSubPath(%s): %v", c.sub, err)
			continue
		}
		if got, want := handlePath(t, f), filepath.Join(vol, c.want); got != want {
			t.Errorf("openSubPath(%s) -> %s, want %s", c.sub, got, want)
		}
		f.Close()
	}
	// Links whose target (taken inside the volume) is missing: an error.
	for _, sub := range []string{"rel/secret", "out/secret", "out", "rel/new"} {
		if f, err := openSubPath(vol, sub, 0o770); err == nil {
			t.Errorf("openSubPath(%s) -> %s, want an error", sub, handlePath(t, f))
			f.Close()
		}
	}
	entries, err := os.ReadDir(outside)
	if err != nil || len(entries) != 1 {
		t.Fatalf("the outside directory changed: %v %v", entries, err)
	}
	for _, d := range []string{"new", "new/deeper", "etc"} {
		if fi, err := os.Stat(filepath.Join(vol, d)); err != nil || fi.Mode().Perm() != 0o770 {
			t.Fatalf("created %s: %v %v, want mode 0770", d, fi, err)
		}
	}
	// A dangling link cannot be created through.
	if err := os.Symlink("/nonexistent-dir-xyz", filepath.Join(vol, "dangling")); err != nil {
		t.Fatal(err)
	}
	if f, err := openSubPath(vol, "dangling/x", 0o770); err == nil {
		t.Errorf("openSubPath through a dangling link -> %s", handlePath(t, f))
		f.Close()
	}
	if _, err := os.Stat("/nonexistent-dir-xyz"); !os.IsNotExist(err) {
		t.Fatal("a directory was created outside the volume")
	}
}

func TestPrepareSubPath(t *testing.T) {
	testkit.RequireRoot(t, "sets volumes up: mounts, ownership, device nodes")
	ctx := context.Background()
	m, _ := newManager(t)
	pod := testPod("uid-sub", corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	mounts, err := m.SetupPod(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	vol := mounts["data"].HostPath
	outside := t.TempDir()
	if err := os.MkdirAll(filepath.Join(vol, "conf"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vol, "conf/app.conf"), []byte("x=1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(vol, "esc")); err != nil {
		t.Fatal(err)
	}

	checkSubPathFile(t, m, pod, mounts["data"])

	// A missing directory is created with the volume's mode (0777).
	dir, err := m.PrepareSubPath(pod, "c", 1, "data", mounts["data"], "logs/c")
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(vol, "logs/c")); err != nil || fi.Mode().Perm() != 0o777 {
		t.Fatalf("created subPath: %v %v, want 0777", fi, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "out.log"), []byte("y"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(vol, "logs/c/out.log")); err != nil {
		t.Fatalf("a write through the bind is not in the volume: %v", err)
	}

	// A symlink out of the volume: refused, nothing created outside; a
	// link to "/" means the volume's root.
	if _, err := m.PrepareSubPath(pod, "c", 2, "data", mounts["data"], "esc/x"); err == nil {
		t.Fatal("a subPath through a link out of the volume was accepted")
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("the subPath escaped the volume: %v in %s", entries, outside)
	}
	if err := os.Symlink("/", filepath.Join(vol, "root")); err != nil {
		t.Fatal(err)
	}
	rootSub, err := m.PrepareSubPath(pod, "c", 3, "data", mounts["data"], "root/conf")
	if err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(rootSub, "app.conf")); err != nil || string(data) != "x=1" {
		t.Fatalf("root/conf is not the volume's conf: %q %v", data, err)
	}

	if _, err := m.PrepareSubPath(pod, "c", 0, "../x", mounts["data"], "a"); err == nil {
		t.Fatal("a volume name with a slash was accepted")
	}
	if err := m.TeardownPod(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
	checkNoMountsBelow(t, m.PodDir(pod.UID))
	if _, err := os.Stat(m.PodDir(pod.UID)); !os.IsNotExist(err) {
		t.Fatalf("pod dir left: %v", err)
	}
}

// checkSubPathFile binds a file, twice (a restart), without stacking.
func checkSubPathFile(t *testing.T, m *Manager, pod *corev1.Pod, mnt Mount) {
	t.Helper()
	var file string
	var err error
	for range 2 {
		if file, err = m.PrepareSubPath(pod, "c", 0, "data", mnt, "conf/app.conf"); err != nil {
			t.Fatal(err)
		}
		if n := len(mountsOn(t, file)); n != 1 {
			t.Fatalf("%d mounts on %s, want 1", n, file)
		}
	}
	if !strings.HasSuffix(file, "pods/uid-sub/volume-subpaths/data/c/0") {
		t.Fatalf("bind path %s", file)
	}
	if data, err := os.ReadFile(file); err != nil || string(data) != "x=1" {
		t.Fatalf("through the bind: %q %v", data, err)
	}

}

func TestPrepareSubPathOfConfigMapKey(t *testing.T) {
	testkit.RequireRoot(t, "sets volumes up: mounts, ownership, device nodes")
	ctx := context.Background()
	src := newFakeSources()
	src.setConfigMap("ns", "cm", map[string]string{"app.conf": "v1"})
	m, _ := newManagerCfg(t, Config{Sources: src})
	pod := testPod("uid-subcm", corev1.Volume{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}})
	mounts, err := m.SetupPod(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.PrepareSubPath(pod, "c", 0, "cfg", mounts["cfg"], "app.conf")
	if err != nil {
		t.Fatal(err)
	}
	// The bind holds the version it was made from, as upstream (a subPath
	// of a configMap does not follow updates).
	src.setConfigMap("ns", "cm", map[string]string{"app.conf": "v2"})
	if err := m.UpdatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(p); err != nil || string(data) != "v1" {
		t.Fatalf("through the bind: %q %v, want v1", data, err)
	}
	if data, _ := os.ReadFile(filepath.Join(mounts["cfg"].HostPath, "app.conf")); string(data) != "v2" {
		t.Fatalf("volume = %q, want v2", data)
	}
	if err := m.TeardownPod(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
	checkNoMountsBelow(t, m.PodDir(pod.UID))
}
