package localpath

import (
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRemovable: only a provisioned volume's directory directly under the
// node's own directory may be removed, whatever the annotation lists.
func TestRemovable(t *testing.T) {
	base := "/var/lib/nodelet/storage"
	for dir, want := range map[string]bool{
		base + "/pvc-1_ns_name":         true,
		base + "/../pvc-1":              false,
		base + "/sub/pvc-1":             false,
		base + "/other":                 false,
		"/etc":                          false,
		"pvc-1":                         false,
		"/var/lib/nodelet/storagex/pvc": false,
		base:                            false,
	} {
		if got := Removable(base, dir); got != want {
			t.Errorf("Removable(%q) = %v, want %v", dir, got, want)
		}
	}
	if Removable("", "/pvc-1") {
		t.Error("a node without a directory removes")
	}
}

func TestCleanupAnnotation(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationCleanup: CleanupValue([]string{"/a/pvc-1", "/a/pvc-2"})}}}
	if got := CleanupList(n); len(got) != 2 || got[1] != "/a/pvc-2" {
		t.Errorf("round trip: %v", got)
	}
	n.Annotations[AnnotationCleanup] = "not json"
	if got := CleanupList(n); got != nil {
		t.Errorf("malformed: %v", got)
	}
	if CleanupValue(nil) != "" {
		t.Error("an empty list has a value")
	}
}

// A volume directory in a base the node marked is removable; in an
// unmarked one, or where the marker is a link, it is not.
func TestRemovableInMarkedBase(t *testing.T) {
	own, classDir, unmarked, linked := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	if err := MarkBase(classDir); err != nil {
		t.Fatal(err)
	}
	if err := MarkBase(classDir); err != nil {
		t.Fatalf("marking twice: %v", err)
	}
	if err := os.Symlink(filepath.Join(classDir, BaseMarker), filepath.Join(linked, BaseMarker)); err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]bool{
		own + "/pvc-1":               true,
		classDir + "/pvc-1_ns_name":  true,
		classDir + "/other":          false,
		unmarked + "/pvc-1":          false,
		linked + "/pvc-1":            false,
		classDir + "/sub/../pvc-1":   false,
		filepath.Dir(classDir) + "/": false,
	} {
		if got := removableHere(own, dir); got != want {
			t.Errorf("removableHere(%q) = %v, want %v", dir, got, want)
		}
	}
}
