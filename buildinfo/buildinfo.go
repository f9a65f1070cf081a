// Package buildinfo is the one place the project's version lives: the
// control plane serves it on /version, nodes report it as their kubelet
// version and every binary prints it for --version. One value for all
// means a node never claims to be newer than its control plane.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"k8s.io/apimachinery/pkg/version"
)

// Kubernetes is the Kubernetes release whose API the project implements:
// the release of the k8s.io modules in go.mod (k8s.io/api v0.37.2 is
// Kubernetes v1.37.2). TestKubernetesMatchesGoMod keeps the two together.
const Kubernetes = "v1.37.2"

// GitVersion is the project's version as Kubernetes tools see it: the
// release, with "+nodelet" as build metadata (as k3s says "+k3s1"), so
// semantic-version comparisons treat it as that release and not as a
// pre-release of it.
const GitVersion = Kubernetes + "+nodelet"

// commit is set at link time (-ldflags "-X github.com/nodelet/nodelet/buildinfo.commit=SHA");
// the builds here pass -buildvcs=false, so the VCS stamp is often absent.
var commit string

// Commit is the source revision the binary was built from, or "unknown".
func Commit() string {
	if commit != "" {
		return commit
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
}

// Info is the version as the API server's /version reports it.
func Info() version.Info {
	major, minor, _ := strings.Cut(strings.TrimPrefix(Kubernetes, "v"), ".")
	minor, _, _ = strings.Cut(minor, ".")
	return version.Info{
		Major: major, Minor: minor, GitVersion: GitVersion, GitCommit: Commit(),
		GoVersion: runtime.Version(), Compiler: runtime.Compiler,
		Platform: runtime.GOOS + "/" + runtime.GOARCH,
	}
}

// String is the --version line of the named binary, e.g.
// "nodelet v1.37.2+nodelet (commit 6629845)".
func String(binary string) string {
	return fmt.Sprintf("%s %s (commit %s)", binary, GitVersion, Commit())
}
