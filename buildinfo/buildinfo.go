// Package buildinfo is the one place the project's version lives: nodes
// report it as their kubelet version and both binaries print it for
// --version.
package buildinfo

import (
	"fmt"
	"runtime/debug"
)

// GitVersion is the project's release: the Kubernetes version of the
// k8s.io modules it builds on, suffixed with -nodelet. Nodes report it
// as their kubelet version.
const GitVersion = "v1.37.0-nodelet"

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

// String is the --version line of the named binary, e.g.
// "nodelet v1.37.0-nodelet (commit 6629845)".
func String(binary string) string {
	return fmt.Sprintf("%s %s (commit %s)", binary, GitVersion, Commit())
}
