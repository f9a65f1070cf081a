package volumes

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/test/testkit"
)

// newManager returns a Manager rooted in a temporary directory; whatever
// the test leaves mounted there is unmounted before the directory goes.
func newManager(t *testing.T) (*Manager, string) {
	t.Helper()
	return newManagerCfg(t, Config{})
}

// newManagerCfg is newManager with cfg (whose RootDir it sets).
func newManagerCfg(t *testing.T, cfg Config) (*Manager, string) {
	t.Helper()
	root := t.TempDir()
	t.Cleanup(func() {
		if err := unmountAllBelow(root); err != nil {
			t.Errorf("clean-up: %v", err)
		}
	})
	cfg.RootDir = root
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m, root
}

func testPod(uid string, vols ...corev1.Volume) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: types.UID(uid)},
		Spec:       corev1.PodSpec{Volumes: vols, Containers: []corev1.Container{{Name: "c"}}},
	}
}

func mountsOn(t *testing.T, dir string) []mountEntry {
	t.Helper()
	real, ok, err := resolve(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return nil
	}
	all, err := readMounts()
	if err != nil {
		t.Fatal(err)
	}
	var out []mountEntry
	for _, m := range all {
		if m.Point == real {
			out = append(out, m)
		}
	}
	return out
}

func TestEmptyDirOnDisk(t *testing.T) {
	testkit.RequireRoot(t, "sets volumes up: mounts, ownership, device nodes")
	m, root := newManager(t)
	old := unix.Umask(0o022)
	defer unix.Umask(old)
	pod := testPod("uid-1", corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	mounts, err := m.SetupPod(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(root, "pods/uid-1/volumes/kubernetes.io~empty-dir/data")
	if got := mounts["data"]; got.HostPath != want || got.ReadOnly {
		t.Fatalf("mount = %+v, want %s read-write", got, want)
	}
	fi, err := os.Stat(want)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o777 || !fi.IsDir() {
		t.Fatalf("mode = %v, want a directory with 0777", fi.Mode())
	}
	if len(mountsOn(t, want)) != 0 {
		t.Fatal("a disk emptyDir must not be a mount")
	}
	if err := os.WriteFile(filepath.Join(want, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	again, err := m.SetupPod(context.Background(), pod)
	if err != nil || again["data"] != mounts["data"] {
		t.Fatalf("second SetupPod = %v, %v; want %v", again, err, mounts)
	}
	if _, err := os.Stat(filepath.Join(want, "f")); err != nil {
		t.Fatalf("second SetupPod lost data: %v", err)
	}
	for i := range 2 {
		if err := m.TeardownPod(context.Background(), "uid-1"); err != nil {
			t.Fatalf("teardown %d: %v", i, err)
		}
	}
	if _, err := os.Stat(m.PodDir("uid-1")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("pod dir still there: %v", err)
	}
}

func TestEmptyDirMemory(t *testing.T) {
	testkit.RequireRoot(t, "sets volumes up: mounts, ownership, device nodes")
	m, _ := newManager(t)
	limit := resource.MustParse("8Mi")
	pod := testPod("uid-mem", corev1.Volume{Name: "cache", VolumeSource: corev1.VolumeSource{
		EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &limit}}})
	mounts, err := m.SetupPod(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	dir := mounts["cache"].HostPath
	got := mountsOn(t, dir)
	if len(got) != 1 || got[0].FSType != "tmpfs" {
		t.Fatalf("mounts on %s = %+v, want one tmpfs", dir, got)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if size := int64(st.Blocks) * st.Bsize; size != 8<<20 {
		t.Fatalf("tmpfs size = %d, want %d", size, 8<<20)
	}
	if !hasOption(got[0].SuperOptions, "size=8192k") || !hasOption(got[0].Options, "nosuid") || !hasOption(got[0].Options, "nodev") {
		t.Fatalf("tmpfs options = %q / %q, want nosuid,nodev and size=8192k", got[0].Options, got[0].SuperOptions)
	}
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o777 {
		t.Fatalf("tmpfs root mode = %v (%v), want 0777", fi.Mode(), err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	again, err := m.SetupPod(context.Background(), pod)
	if err != nil || again["cache"] != mounts["cache"] {
		t.Fatalf("second SetupPod = %v, %v", again, err)
	}
	if n := len(mountsOn(t, dir)); n != 1 {
		t.Fatalf("second SetupPod stacked mounts: %d on %s", n, dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "f")); err != nil {
		t.Fatalf("second SetupPod lost data: %v", err)
	}
	if err := m.TeardownPod(context.Background(), "uid-mem"); err != nil {
		t.Fatal(err)
	}
	all, err := readMounts()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range all {
		if strings.HasPrefix(e.Point, m.PodDir("uid-mem")) {
			t.Fatalf("still mounted after teardown: %s", e.Point)
		}
	}
	if err := m.TeardownPod(context.Background(), "uid-mem"); err != nil {
		t.Fatalf("second teardown: %v", err)
	}
}

func TestEmptyDirMemoryStacked(t *testing.T) {
	testkit.RequireRoot(t, "sets volumes up: mounts, ownership, device nodes")
	m, _ := newManager(t)
	pod := testPod("uid-stack", corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{
		EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}})
	mounts, err := m.SetupPod(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	dir := mounts["v"].HostPath
	// Someone mounted twice (a crash between mount and record, say).
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	if err := m.TeardownPod(context.Background(), "uid-stack"); err != nil {
		t.Fatal(err)
	}
	if n := len(mountsOn(t, dir)); n != 0 {
		t.Fatalf("%d mounts left on %s", n, dir)
	}
}

func TestTmpfsSize(t *testing.T) {
	withMem := func(limit string) *corev1.Pod {
		p := testPod("u")
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(limit)}
		return p
	}
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	cases := []struct {
		name        string
		allocatable string
		pod         *corev1.Pod
		sizeLimit   *resource.Quantity
		want        int64
	}{
		{"nothing known", "0", testPod("u"), nil, 0},
		{"allocatable only", "1Gi", testPod("u"), nil, 1 << 30},
		{"pod limit below allocatable", "1Gi", withMem("256Mi"), nil, 256 << 20},
		{"pod limit above allocatable", "1Gi", withMem("2Gi"), nil, 1 << 30},
		{"sizeLimit below pod limit", "1Gi", withMem("256Mi"), q("64Mi"), 64 << 20},
		{"sizeLimit above pod limit", "1Gi", withMem("256Mi"), q("512Mi"), 256 << 20},
		{"sizeLimit without allocatable", "0", testPod("u"), q("64Mi"), 64 << 20},
		{"zero sizeLimit ignored", "1Gi", testPod("u"), q("0"), 1 << 30},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := TmpfsSize(resource.MustParse(c.allocatable), c.pod, c.sizeLimit); got != c.want {
				t.Fatalf("TmpfsSize = %d, want %d", got, c.want)
			}
		})
	}
}

func TestHostPathTypes(t *testing.T) {
	testkit.RequireRoot(t, "sets volumes up: mounts, ownership, device nodes")
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	chr, blk := filepath.Join(dir, "chr"), filepath.Join(dir, "blk")
	if err := unix.Mknod(chr, unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(blk, unix.S_IFBLK|0o600, int(unix.Mkdev(7, 200))); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	cases := []struct {
		typ     corev1.HostPathType
		path    string
		wantErr string
	}{
		{corev1.HostPathUnset, missing, ""},
		{corev1.HostPathDirectory, dir, ""},
		{corev1.HostPathDirectory, missing, "hostPath type check failed: " + missing + " is not a directory"},
		{corev1.HostPathDirectory, file, "hostPath type check failed: " + file + " is not a directory"},
		{corev1.HostPathDirectoryOrCreate, file, "hostPath type check failed: " + file + " is not a directory"},
		{corev1.HostPathFile, file, ""},
		{corev1.HostPathFile, dir, "hostPath type check failed: " + dir + " is not a file"},
		{corev1.HostPathFile, missing, "hostPath type check failed: " + missing + " is not a file"},
		{corev1.HostPathFileOrCreate, dir, "hostPath type check failed: " + dir + " is not a file"},
		{corev1.HostPathSocket, sock, ""},
		{corev1.HostPathSocket, file, "hostPath type check failed: " + file + " is not a socket file"},
		{corev1.HostPathCharDev, chr, ""},
		{corev1.HostPathCharDev, blk, "hostPath type check failed: " + blk + " is not a character device"},
		{corev1.HostPathBlockDev, blk, ""},
		{corev1.HostPathBlockDev, chr, "hostPath type check failed: " + chr + " is not a block device"},
		{corev1.HostPathBlockDev, missing, "hostPath type check failed: " + missing + " is not a block device"},
		{"Bogus", dir, "Bogus is an invalid volume type"},
	}
	for _, c := range cases {
		t.Run(string(c.typ)+"_"+filepath.Base(c.path), func(t *testing.T) {
			err := CheckHostPathType(c.path, c.typ)
			if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || err.Error() != c.wantErr) {
				t.Fatalf("CheckHostPathType(%s, %q) = %v, want %q", c.path, c.typ, err, c.wantErr)
			}
		})
	}
}

func TestHostPathCreate(t *testing.T) {
	testkit.RequireRoot(t, "sets volumes up: mounts, ownership, device nodes")
	m, _ := newManager(t)
	base := t.TempDir()
	old := unix.Umask(0)
	defer unix.Umask(old)
	newDir := filepath.Join(base, "a/b/c")
	newFile := filepath.Join(base, "f")
	dirT, fileT := corev1.HostPathDirectoryOrCreate, corev1.HostPathFileOrCreate
	pod := testPod("uid-hp",
		corev1.Volume{Name: "d", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: newDir, Type: &dirT}}},
		corev1.Volume{Name: "f", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: newFile, Type: &fileT}}})
	for range 2 {
		mounts, err := m.SetupPod(context.Background(), pod)
		if err != nil {
			t.Fatal(err)
		}
		if mounts["d"].HostPath != newDir || mounts["f"].HostPath != newFile {
			t.Fatalf("mounts = %+v", mounts)
		}
	}
	if fi, err := os.Stat(newDir); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o755 {
		t.Fatalf("created dir: %v %v, want a 0755 directory", fi, err)
	}
	if fi, err := os.Stat(newFile); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 {
		t.Fatalf("created file: %v %v, want a 0644 file", fi, err)
	}
	// FileOrCreate does not create parent directories.
	deep := filepath.Join(base, "x/y")
	if err := CheckHostPathType(deep, fileT); err == nil {
		t.Fatal("FileOrCreate created parent directories")
	}
	if err := m.TeardownPod(context.Background(), "uid-hp"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(newDir); err != nil {
		t.Fatalf("teardown removed the host's directory: %v", err)
	}
}

func TestUnsupportedVolume(t *testing.T) {
	m, _ := newManager(t)
	pod := testPod("uid-u", corev1.Volume{Name: "share", VolumeSource: corev1.VolumeSource{
		NFS: &corev1.NFSVolumeSource{Server: "127.0.0.1", Path: "/x"}}})
	_, err := m.SetupPod(context.Background(), pod)
	var ve *VolumeError
	if !errors.Is(err, ErrUnsupported) || !errors.As(err, &ve) || ve.Volume != "share" || !strings.Contains(err.Error(), "nfs") {
		t.Fatalf("err = %v, want a VolumeError for share wrapping ErrUnsupported naming nfs", err)
	}
	hp := testPod("uid-u", corev1.Volume{Name: "../x", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	if _, err := m.SetupPod(context.Background(), hp); err == nil {
		t.Fatal("a volume name with a slash was accepted")
	}
	hp = testPod("uid-u", corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumHugePages}}})
	if _, err := m.SetupPod(context.Background(), hp); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("HugePages medium: err = %v, want ErrUnsupported", err)
	}
	hp = testPod("uid-u", corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/../etc"}}})
	if _, err := m.SetupPod(context.Background(), hp); err == nil || !strings.Contains(err.Error(), "'..'") {
		t.Fatalf("hostPath with '..': err = %v", err)
	}
}

func TestTeardownPartialAndListPods(t *testing.T) {
	m, root := newManager(t)
	ctx := context.Background()
	if uids, err := m.ListPods(); err != nil || len(uids) != 0 {
		t.Fatalf("ListPods on an empty root = %v, %v", uids, err)
	}
	if err := m.TeardownPod(ctx, "never-existed"); err != nil {
		t.Fatalf("teardown of a missing pod: %v", err)
	}
	// Half-built: a pod dir, an empty plugin dir, a dir of an unknown plugin.
	for _, d := range []string{"pods/a/volumes/kubernetes.io~empty-dir", "pods/a/volumes/kubernetes.io~configmap/x", "pods/b", "pods/c/etc-hosts-dir"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	uids, err := m.ListPods()
	if err != nil || strings.Join(toStrings(uids), ",") != "a,b,c" {
		t.Fatalf("ListPods = %v, %v; want a,b,c", uids, err)
	}
	for _, uid := range uids {
		if err := m.TeardownPod(ctx, uid); err != nil {
			t.Fatalf("teardown %s: %v", uid, err)
		}
	}
	if uids, err := m.ListPods(); err != nil || len(uids) != 0 {
		t.Fatalf("ListPods after teardown = %v, %v", uids, err)
	}
	if err := m.TeardownPod(ctx, "../etc"); err == nil {
		t.Fatal("a uid with a slash was accepted")
	}
}

func hasOption(opts, want string) bool {
	return slices.Contains(strings.Split(opts, ","), want)
}

func toStrings(uids []types.UID) []string {
	out := make([]string, len(uids))
	for i, u := range uids {
		out[i] = string(u)
	}
	return out
}

func TestParseMountInfo(t *testing.T) {
	data := []byte("36 35 98:0 /mnt1 /mnt/with\\040space rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n" +
		"37 36 0:5 / /run/x rw shared:2 - tmpfs tmpfs rw\nbroken line\n")
	got := parseMountInfo(data)
	if len(got) != 2 || got[0] != (mountEntry{"/mnt/with space", "ext3", "rw,noatime", "rw,errors=continue"}) ||
		got[1] != (mountEntry{"/run/x", "tmpfs", "rw", "rw"}) {
		t.Fatalf("parseMountInfo = %+v", got)
	}
	pts := mountsBelow("/run", []mountEntry{{Point: "/run"}, {Point: "/run/x"}, {Point: "/running"}})
	if strings.Join(pts, ",") != "/run/x,/run" {
		t.Fatalf("mountsBelow = %v", pts)
	}
}
