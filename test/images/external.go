package images

import (
	"fmt"
	"path/filepath"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Programs no one here wrote, built from the module proxy (BuildGoProgram)
// into images under the references their projects publish them as.
var (
	// LocalPathProvisioner is rancher's local-path-provisioner; its main
	// package is the module root.
	LocalPathProvisioner = GoProgram{Module: "github.com/rancher/local-path-provisioner", Version: "v0.0.30",
		Binary: "local-path-provisioner", VersionVar: "main.VERSION"}
	// ExternalProvisioner is the CSI external-provisioner sidecar.
	ExternalProvisioner = GoProgram{Module: "github.com/kubernetes-csi/external-provisioner/v6", Version: "v6.4.0",
		Package: "cmd/csi-provisioner", Binary: "csi-provisioner", VersionVar: "main.version"}
	// ExternalAttacher is the CSI external-attacher sidecar.
	ExternalAttacher = GoProgram{Module: "github.com/kubernetes-csi/external-attacher/v4", Version: "v4.13.0",
		Package: "cmd/csi-attacher", Binary: "csi-attacher", VersionVar: "main.version"}
)

// References of the images built from the module proxy.
const (
	LocalPathProvisionerRef = "docker.io/rancher/local-path-provisioner:v0.0.30"
	ExternalProvisionerRef  = "registry.k8s.io/sig-storage/csi-provisioner:v6.4.0"
	ExternalAttacherRef     = "registry.k8s.io/sig-storage/csi-attacher:v4.13.0"
)

// programImage describes a single-binary image: where the binary goes and
// how it starts, as the program's own Dockerfile has it.
type programImage struct {
	ref        string
	path       string   // the binary's path in the image
	entrypoint []string // the image's entrypoint, if any
	cmd        []string // the image's default command
	busybox    bool     // add busybox's shell and tools (an alpine base has them)
}

// writeProgramImage writes the image of the binary bin into dir as
// NAME.tar and returns the archive's path.
func writeProgramImage(dir, name, bin string, pi programImage) (string, error) {
	e, err := hostFile(bin, pi.path)
	if err != nil {
		return "", err
	}
	e.mode = 0o755
	files := append(baseFiles(), e)
	if pi.busybox {
		bb, err := hostFile(BusyboxBinary, "/bin/busybox")
		if err != nil {
			return "", err
		}
		files = append(files, bb)
		for _, a := range busyboxApplets {
			files = append(files, symlinkEntry("/bin/"+a, "busybox"))
		}
	}
	img := image{
		entries: files,
		config:  ocispec.ImageConfig{Env: []string{imagePath}, Entrypoint: pi.entrypoint, Cmd: pi.cmd},
		refs:    []string{pi.ref},
	}
	return writeArchive(filepath.Join(dir, name+".tar"), img)
}

// LocalPathProvisionerImage builds rancher's local-path-provisioner
// (cached under cacheDir, see BuildGoProgram) and writes its image
// (LocalPathProvisionerRef) into dir, laid out as its Dockerfile does:
// /usr/bin/local-path-provisioner, CMD local-path-provisioner, on a base
// with a shell (upstream's is alpine). It returns the archive's path.
func LocalPathProvisionerImage(dir, cacheDir string) (string, error) {
	bin, err := BuildGoProgram(cacheDir, LocalPathProvisioner)
	if err != nil {
		return "", fmt.Errorf("local-path-provisioner image: %w", err)
	}
	p, err := writeProgramImage(dir, "local-path-provisioner", bin, programImage{ref: LocalPathProvisionerRef,
		path: "/usr/bin/local-path-provisioner", cmd: []string{"local-path-provisioner"}, busybox: true})
	if err != nil {
		return "", fmt.Errorf("local-path-provisioner image: %w", err)
	}
	return p, nil
}

// ExternalProvisionerImage builds the CSI external-provisioner (cached
// under cacheDir) and writes its image (ExternalProvisionerRef) into dir
// as its Dockerfile lays it out on distroless: /csi-provisioner, the
// entrypoint. It returns the archive's path.
func ExternalProvisionerImage(dir, cacheDir string) (string, error) {
	bin, err := BuildGoProgram(cacheDir, ExternalProvisioner)
	if err != nil {
		return "", fmt.Errorf("csi-provisioner image: %w", err)
	}
	p, err := writeProgramImage(dir, "csi-provisioner", bin, programImage{ref: ExternalProvisionerRef,
		path: "/csi-provisioner", entrypoint: []string{"/csi-provisioner"}})
	if err != nil {
		return "", fmt.Errorf("csi-provisioner image: %w", err)
	}
	return p, nil
}

// ExternalAttacherImage builds the CSI external-attacher (cached under
// cacheDir) and writes its image (ExternalAttacherRef) into dir as its
// Dockerfile lays it out on distroless: /csi-attacher, the entrypoint. It
// returns the archive's path.
func ExternalAttacherImage(dir, cacheDir string) (string, error) {
	bin, err := BuildGoProgram(cacheDir, ExternalAttacher)
	if err != nil {
		return "", fmt.Errorf("csi-attacher image: %w", err)
	}
	p, err := writeProgramImage(dir, "csi-attacher", bin, programImage{ref: ExternalAttacherRef,
		path: "/csi-attacher", entrypoint: []string{"/csi-attacher"}})
	if err != nil {
		return "", fmt.Errorf("csi-attacher image: %w", err)
	}
	return p, nil
}
