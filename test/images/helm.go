package images

import "fmt"

// Helm 3 and Helm 4, the clients, built from the module proxy as their
// Makefiles build them (./cmd/helm, the version stamped into
// internal/version). They are binaries the tests run on the host, not
// images.
var (
	Helm3 = GoProgram{Module: "helm.sh/helm/v3", Version: "v3.22.0", Package: "cmd/helm", Binary: "helm",
		VersionVar: "helm.sh/helm/v3/internal/version.version"}
	Helm4 = GoProgram{Module: "helm.sh/helm/v4", Version: "v4.3.1", Package: "cmd/helm", Binary: "helm",
		VersionVar: "helm.sh/helm/v4/internal/version.version"}
)

// HelmBinary returns the path of the helm client of the given major
// version (3 or 4), built from the module proxy and cached under cacheDir
// (see BuildGoProgram). The first build downloads Helm's module and its
// dependencies through the proxy and takes a few minutes on 2 cores; a
// proxy that refuses the module fails here with its own answer.
func HelmBinary(cacheDir string, major int) (string, error) {
	var p GoProgram
	switch major {
	case 3:
		p = Helm3
	case 4:
		p = Helm4
	default:
		return "", fmt.Errorf("helm %d: only Helm 3 and Helm 4 are built", major)
	}
	bin, err := BuildGoProgram(cacheDir, p)
	if err != nil {
		return "", fmt.Errorf("helm %d from the Go module proxy (GOPROXY decides where from): %w", major, err)
	}
	return bin, nil
}
