package runtimetest

import (
	"context"
	"testing"

	"github.com/nodelet/nodelet/test/images"
)

// Importer imports an image archive (*containerd.Runtime).
type Importer interface {
	ImportArchive(ctx context.Context, path string) ([]string, error)
}

// ImportTestImages builds the test images in dir (the pause image from the
// project's pause program, busybox, and nginx too when withNginx) and
// imports them.
func ImportTestImages(t testing.TB, rt Importer, dir string, withNginx bool) {
	t.Helper()
	pauseBin, err := images.BuildPause(dir)
	if err != nil {
		t.Fatal(err)
	}
	pauseTar, _, err := images.Pause(dir, pauseBin)
	if err != nil {
		t.Fatal(err)
	}
	busyboxTar, _, err := images.Busybox(dir)
	if err != nil {
		t.Fatal(err)
	}
	tars := []string{pauseTar, busyboxTar}
	if withNginx {
		nginxTar, _, err := images.Nginx(dir)
		if err != nil {
			t.Fatal(err)
		}
		tars = append(tars, nginxTar)
	}
	for _, tar := range tars {
		if _, err := rt.ImportArchive(context.Background(), tar); err != nil {
			t.Fatal(err)
		}
	}
}
