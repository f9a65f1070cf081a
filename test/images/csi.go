package images

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/nodelet/nodelet/hosttools"
)

// References of the tests' own CSI programs (test/images/csimock and
// csiregistrar), named apart from any published image.
const (
	CSIMockDriverRef = "nodelet.io/test/csi-mock-driver:v5.6.0"
	CSIRegistrarRef  = "nodelet.io/test/csi-registrar:v1"
)

// buildOwn builds a main package of the nodelet module as a static
// binary into dir, as BuildPause does (the current directory must be
// inside the module, as a test's is).
func buildOwn(dir, pkg, name string) (string, error) {
	out := filepath.Join(dir, name)
	cmd := hosttools.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "github.com/nodelet/nodelet/"+pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %w: %s", pkg, err, b)
	}
	return out, nil
}

// CSIMockDriverImage writes the image of the tests' CSI driver (csimock,
// on csi-test/v5's mock driver harness) into dir: /csimock, the
// entrypoint. It returns the archive's path.
func CSIMockDriverImage(dir string) (string, error) {
	return ownProgramImage(dir, "test/images/csimock", "csimock", CSIMockDriverRef)
}

// CSIRegistrarImage writes the image of the tests' registrar
// (csiregistrar, the node-driver-registrar's part) into dir:
// /csiregistrar, the entrypoint. It returns the archive's path.
func CSIRegistrarImage(dir string) (string, error) {
	return ownProgramImage(dir, "test/images/csiregistrar", "csiregistrar", CSIRegistrarRef)
}

func ownProgramImage(dir, pkg, name, ref string) (string, error) {
	tmp, err := os.MkdirTemp("", "nodelet-image-"+name+"-")
	if err != nil {
		return "", fmt.Errorf("%s image: %w", name, err)
	}
	defer os.RemoveAll(tmp)
	bin, err := buildOwn(tmp, pkg, name)
	if err != nil {
		return "", fmt.Errorf("%s image: %w", name, err)
	}
	p, err := writeProgramImage(dir, name, bin, programImage{ref: ref, path: "/" + name, entrypoint: []string{"/" + name}})
	if err != nil {
		return "", fmt.Errorf("%s image: %w", name, err)
	}
	return p, nil
}
