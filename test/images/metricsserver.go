package images

import "fmt"

// MetricsServer is sigs.k8s.io/metrics-server, which takes metrics.k8s.io
// over from the control plane's built-in metrics through the aggregation
// layer. Its Makefile sets the version with -X on pkg/version.gitVersion.
var MetricsServer = GoProgram{Module: "sigs.k8s.io/metrics-server", Version: "v0.8.0",
	Package: "cmd/metrics-server", Binary: "metrics-server", VersionVar: "sigs.k8s.io/metrics-server/pkg/version.gitVersion"}

// MetricsServerRef is the reference metrics-server publishes its image as
// (its components.yaml names it).
const MetricsServerRef = "registry.k8s.io/metrics-server/metrics-server:v0.8.0"

// MetricsServerImage builds metrics-server (cached under cacheDir, see
// BuildGoProgram) and writes its image (MetricsServerRef) into dir as its
// Dockerfile lays it out on distroless: /metrics-server, the entrypoint.
// (Its USER 65534 is not carried: the image has no user of its own, and
// components.yaml runs it as 1000 anyway.) It returns the archive's path.
func MetricsServerImage(dir, cacheDir string) (string, error) {
	bin, err := BuildGoProgram(cacheDir, MetricsServer)
	if err != nil {
		return "", fmt.Errorf("metrics-server image: %w", err)
	}
	p, err := writeProgramImage(dir, "metrics-server", bin, programImage{ref: MetricsServerRef,
		path: "/metrics-server", entrypoint: []string{"/metrics-server"}})
	if err != nil {
		return "", fmt.Errorf("metrics-server image: %w", err)
	}
	return p, nil
}
