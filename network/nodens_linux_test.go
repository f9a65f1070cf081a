package network

import (
	"path/filepath"
	"testing"

	"github.com/nodelet/nodelet/hosttools"
	"github.com/nodelet/nodelet/test/testkit"
)

// The tests that set up real pod networks run their bodies under
// testkit.InNodeNetns: the bridge, the plugins and the iptables rules
// live in the "node" namespace and vanish with it; the pods' namespaces
// are bind mounts under the base directory parent and child share.

// requireRootNetTools fails the test unless it runs as root with the CNI
// plugins and the tools the pod network tests run.
func requireRootNetTools(t *testing.T) {
	t.Helper()
	testkit.RequireRoot(t, "netns, bridge, iptables")
	requirePlugins(t)
	if err := hosttools.Check("nsenter", "busybox", "iptables"); err != nil {
		t.Fatal(err)
	}
}

// nsExec runs a command inside the netns at nsPath.
func nsExec(nsPath string, args ...string) (string, error) {
	out, err := hosttools.Command("nsenter", append([]string{"--net=" + nsPath}, args...)...).CombinedOutput()
	return string(out), err
}

// ping sends one ICMP echo from the netns at nsPath to ip, an address of a
// namespace this test made.
func ping(t *testing.T, nsPath, ip string) {
	t.Helper()
	if out, err := nsExec(nsPath, "busybox", "ping", "-c1", "-W1", ip); err != nil {
		t.Errorf("ping %s from %s: %v\n%s", ip, filepath.Base(nsPath), err, out)
	}
}
