package containerlogs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRotatingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c", "0.log")
	r, err := OpenRotating(path, Rotation{MaxSize: 100, MaxFiles: 3})
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	r.now = func() time.Time { clock = clock.Add(time.Second); return clock }
	entry := strings.Repeat("x", 39) + "\n" // 40 bytes: two per file
	for i := range 9 {
		if _, err := r.Write([]byte(entry)); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	rotated, err := Rotated(path)
	if err != nil {
		t.Fatal(err)
	}
	// 9 entries: 5 files of 2,2,2,2,1; the current one and the 2 newest
	// rotated remain.
	want := []string{path + ".20261125-100003", path + ".20261125-100004"}
	if strings.Join(rotated, ",") != strings.Join(want, ",") {
		t.Fatalf("rotated files %v, want %v", rotated, want)
	}
	for _, p := range append(rotated, path) {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > 100 {
			t.Errorf("%s holds %d bytes, over the 100-byte limit", p, len(data))
		}
	}
	if data, _ := os.ReadFile(path); len(data) != 40 {
		t.Errorf("current file holds %d bytes, want the last entry (40)", len(data))
	}
}

func TestRotatingFileSameSecond(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	r, err := OpenRotating(path, Rotation{MaxSize: 10, MaxFiles: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.now = func() time.Time { return time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC) }
	for range 4 {
		if _, err := r.Write([]byte("0123456789\n")); err != nil {
			t.Fatal(err)
		}
	}
	rotated, _ := Rotated(path)
	if len(rotated) != 3 || rotated[1] != path+".20261125-100000-001" {
		t.Errorf("rotated files %v: want 3, distinct, in order", rotated)
	}
}

func TestRotatingFileNoLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	r, err := OpenRotating(path, Rotation{})
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		r.Write([]byte("0123456789\n"))
	}
	r.Close()
	if rotated, _ := Rotated(path); len(rotated) != 0 {
		t.Errorf("rotated without a limit: %v", rotated)
	}
}
