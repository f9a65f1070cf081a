package volumes

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nodelet/nodelet/test/testkit"
)

func TestValidatePath(t *testing.T) {
	cases := []struct {
		path    string
		wantErr string
	}{
		{"a", ""},
		{"a/b/c", ""},
		{"a/./b", ""},
		{".hidden", ""},
		{"a/..b", ""},
		{"", "must not be empty"},
		{"/abs", "must be relative"},
		{"a/../b", "must not contain '..'"},
		{"..", "must not contain '..'"},
		{"..data", "must not start with '..'"},
		{"..a/b", "must not start with '..'"},
		{".", "names no file"},
		{strings.Repeat("x", 256), "at most 255"},
		{strings.Repeat("abcdefg/", 513), "at most 4096"},
		{"a\x00b", "NUL"},
	}
	for _, c := range cases {
		err := validatePath(c.path)
		if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
			t.Errorf("validatePath(%.20q) = %v, want error containing %q", c.path, err, c.wantErr)
		}
	}
	if _, err := validatePayload(map[string]FileProjection{"a": {}, "a/b": {}}); err == nil {
		t.Error("a payload with a file that is also a directory was accepted")
	}
	if _, err := validatePayload(map[string]FileProjection{"a/b": {}, "a//b": {}}); err == nil {
		t.Error("a payload with two paths that clean to the same was accepted")
	}
	if _, err := validatePayload(map[string]FileProjection{"a": {Mode: 0o4755}}); err == nil {
		t.Error("a setuid mode was accepted")
	}
}

// writeOK writes payload and checks whether it changed the directory.
func writeOK(t *testing.T, w *AtomicWriter, payload map[string]FileProjection, wantChanged bool) {
	t.Helper()
	changed, err := w.Write(payload)
	if err != nil {
		t.Fatal(err)
	}
	if changed != wantChanged {
		t.Fatalf("Write changed = %v, want %v", changed, wantChanged)
	}
}

// checkTree checks that dir shows exactly want (visible path -> content,
// mode) through the ..data layout, and returns the data directory's name.
func checkTree(t *testing.T, dir string, want map[string]FileProjection) string {
	t.Helper()
	ts, err := os.Readlink(filepath.Join(dir, dataDirName))
	if err != nil || !strings.HasPrefix(ts, "..") || strings.Contains(ts, "/") {
		t.Fatalf("..data -> %q (%v), want a ..timestamp name", ts, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, ts)); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("data directory %s: %v %v, want 0755", ts, fi, err)
	}
	for p, f := range want {
		data, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil || string(data) != string(f.Data) {
			t.Fatalf("%s = %q (%v), want %q", p, data, err, f.Data)
		}
		fi, err := os.Stat(filepath.Join(dir, p))
		if err != nil || fi.Mode().Perm() != f.Mode {
			t.Fatalf("%s mode = %v (%v), want %v", p, fi.Mode(), err, f.Mode)
		}
	}
	var visible []string
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		n := e.Name()
		if n == dataDirName || n == ts {
			continue
		}
		if strings.HasPrefix(n, "..") {
			t.Fatalf("stray reserved entry %s left in %s", n, dir)
		}
		if target, err := os.Readlink(filepath.Join(dir, n)); err != nil || target != "..data/"+n {
			t.Fatalf("visible %s -> %q (%v), want a link to ..data/%s", n, target, err, n)
		}
		visible = append(visible, n)
	}
	if want := topNames(want); !slices.Equal(visible, want) {
		t.Fatalf("visible names = %v, want %v", visible, want)
	}
	files, err := readTree(filepath.Join(dir, ts))
	if err != nil || len(files) != len(want) {
		t.Fatalf("data directory holds %d files (%v), want %d", len(files), err, len(want))
	}
	return ts
}

func TestAtomicWriterLayoutAndUpdates(t *testing.T) {
	old := unix.Umask(0o077) // modes must not depend on the umask
	defer unix.Umask(old)
	dir := t.TempDir()
	w := &AtomicWriter{Dir: dir}

	v1 := map[string]FileProjection{
		"a":          {Data: []byte("one"), Mode: 0o644},
		"conf/b.txt": {Data: []byte("two"), Mode: 0o400},
		"conf/sub/c": {Data: []byte("three"), Mode: 0o755},
		"empty":      {Data: nil, Mode: 0o600},
	}
	writeOK(t, w, v1, true)
	ts1 := checkTree(t, dir, v1)
	if fi, err := os.Stat(filepath.Join(dir, ts1, "conf/sub")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("nested data dir: %v %v, want 0755", fi, err)
	}

	// The same payload again: nothing happens.
	writeOK(t, w, v1, false)
	if ts := checkTree(t, dir, v1); ts != ts1 {
		t.Fatalf("unchanged payload moved ..data from %s to %s", ts1, ts)
	}

	// A changed file: a new data directory; the old one is gone.
	v2 := map[string]FileProjection{
		"a":          {Data: []byte("ONE"), Mode: 0o644},
		"conf/b.txt": {Data: []byte("two"), Mode: 0o400},
		"conf/sub/c": {Data: []byte("three"), Mode: 0o755},
		"empty":      {Data: nil, Mode: 0o600},
	}
	writeOK(t, w, v2, true)
	ts2 := checkTree(t, dir, v2)
	if ts2 == ts1 {
		t.Fatal("a changed payload kept the data directory")
	}
	if _, err := os.Lstat(filepath.Join(dir, ts1)); !os.IsNotExist(err) {
		t.Fatalf("old data directory %s still there: %v", ts1, err)
	}

	// Files leave, one arrives, a mode changes: the links follow.
	v3 := map[string]FileProjection{
		"a":     {Data: []byte("ONE"), Mode: 0o640},
		"new/x": {Data: []byte("x"), Mode: 0o644},
	}
	writeOK(t, w, v3, true)
	checkTree(t, dir, v3)

	// Down to nothing: every visible link goes, ..data stays.
	writeOK(t, w, map[string]FileProjection{}, true)
	checkTree(t, dir, map[string]FileProjection{})
	writeOK(t, w, map[string]FileProjection{}, false)
}

func TestAtomicWriterRecovers(t *testing.T) {
	dir := t.TempDir()
	w := &AtomicWriter{Dir: dir}
	v := map[string]FileProjection{"k": {Data: []byte("v"), Mode: 0o644}}
	writeOK(t, w, v, true)
	ts := checkTree(t, dir, v)

	// A crash after the swap and before the visible links: rewritten.
	if err := os.Remove(filepath.Join(dir, "k")); err != nil {
		t.Fatal(err)
	}
	writeOK(t, w, v, true)
	ts = checkTree(t, dir, v)

	// Leftovers of a crashed write (a data directory, ..data_tmp) go with
	// the next change; a dangling ..data means rewrite.
	if err := os.Mkdir(filepath.Join(dir, "..2000_01_01_00_00_00.123"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("nowhere", filepath.Join(dir, newDataDirName)); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, ts)); err != nil {
		t.Fatal(err)
	}
	writeOK(t, w, v, true)
	checkTree(t, dir, v)

	// A stale link of a lost version (a crash before its removal) goes,
	// even when the content is the same.
	if err := os.Symlink("..data/gone", filepath.Join(dir, "gone")); err != nil {
		t.Fatal(err)
	}
	writeOK(t, w, v, true)
	checkTree(t, dir, v)

	// Tampered content is put back.
	real := filepath.Join(dir, dataDirName, "k")
	if err := os.Chmod(real, 0o666); err != nil {
		t.Fatal(err)
	}
	writeOK(t, w, v, true)
	checkTree(t, dir, v)

	// Something that is not our link stands in the way: an error, and the
	// writer does not delete it.
	if err := os.Mkdir(filepath.Join(dir, "other"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(map[string]FileProjection{"other/f": {Data: []byte("x"), Mode: 0o644}}); err == nil {
		t.Fatal("Write replaced a directory it did not create")
	}
	if fi, err := os.Lstat(filepath.Join(dir, "other")); err != nil || !fi.IsDir() {
		t.Fatalf("the foreign directory is gone: %v", err)
	}

	// An invalid payload writes nothing.
	before, _ := os.Readlink(filepath.Join(dir, dataDirName))
	if _, err := w.Write(map[string]FileProjection{"../x": {}}); err == nil {
		t.Fatal("invalid payload accepted")
	}
	if after, _ := os.Readlink(filepath.Join(dir, dataDirName)); after != before {
		t.Fatal("an invalid payload moved ..data")
	}
}

func TestAtomicWriterFSGroup(t *testing.T) {
	testkit.RequireRoot(t, "sets volumes up: mounts, ownership, device nodes")
	dir := t.TempDir()
	gid := int64(4321)
	w := &AtomicWriter{Dir: dir, FSGroup: &gid}
	v := map[string]FileProjection{"s/token": {Data: []byte("t"), Mode: 0o400}}
	writeOK(t, w, v, true)
	checkTree(t, dir, map[string]FileProjection{"s/token": {Data: []byte("t"), Mode: 0o440}})
	for _, p := range []string{"s/token", "s", "."} {
		fi, err := os.Stat(filepath.Join(dir, dataDirName, p))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); int64(st.Gid) != gid {
			t.Fatalf("%s: gid %d, want %d", p, st.Gid, gid)
		}
		if fi.IsDir() && fi.Mode()&os.ModeSetgid == 0 {
			t.Fatalf("%s: directory not setgid: %v", p, fi.Mode())
		}
	}
	writeOK(t, w, v, false)
	// Another group: rewritten.
	other := int64(4322)
	writeOK(t, &AtomicWriter{Dir: dir, FSGroup: &other}, v, true)
}
