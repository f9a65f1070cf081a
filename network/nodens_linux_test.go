package network

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nodelet/nodelet/hosttools"
)

// The tests that set up real pod networks run inside a network namespace
// made for the "node": the test binary re-executes itself with
// CLONE_NEWNET, so every thread of the child, every plugin it runs, the
// bridge and the iptables rules live in that namespace and vanish with it.
// The pods' namespaces are bind mounts under a temporary directory that
// parent and child share (same mount namespace); the parent unmounts
// whatever the child left there, even when the child failed or was killed.

const (
	childTestEnv = "NODELET_NETWORK_TEST_CHILD" // the test the child runs
	childBaseEnv = "NODELET_NETWORK_TEST_BASE"  // the shared temp dir
)

// inNodeNetns runs body, for the test t, in a child process inside a fresh
// network namespace, with base a temporary directory for its state.
func inNodeNetns(t *testing.T, body func(t *testing.T, base string)) {
	if os.Getenv(childTestEnv) == t.Name() {
		base := os.Getenv(childBaseEnv)
		if base == "" {
			t.Fatalf("%s set without %s", childTestEnv, childBaseEnv)
		}
		setNodeLoopbackUp(t)
		body(t, base)
		return
	}
	requireRootNetTools(t)
	base := t.TempDir()
	t.Cleanup(func() { unmountUnder(t, base) }) // runs before TempDir's removal

	cmd := exec.CommandContext(t.Context(), os.Args[0],
		"-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), childTestEnv+"="+t.Name(), childBaseEnv+"="+base)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	t.Logf("node netns child output:\n%s", out)
	if err != nil {
		t.Fatalf("test body in the node netns failed: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("child did not run %s", t.Name())
	}
}

func requireRootNetTools(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("pod network tests need root (netns, bridge, iptables); running as uid %d", os.Geteuid())
	}
	requirePlugins(t)
	if err := hosttools.Check("nsenter", "busybox", "iptables"); err != nil {
		t.Fatal(err)
	}
}

func setNodeLoopbackUp(t *testing.T) {
	t.Helper()
	lo, err := netlink.LinkByName("lo")
	if err == nil {
		err = netlink.LinkSetUp(lo)
	}
	if err != nil {
		t.Fatalf("set lo up in the node netns: %v", err)
	}
}

// unmountUnder detaches every mount below dir (pod netns left by a failed
// or killed child), deepest first.
func unmountUnder(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Errorf("read mountinfo: %v", err)
		return
	}
	defer f.Close()
	var mounts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountPath(fields[4])
		if strings.HasPrefix(mp, dir+"/") {
			mounts = append(mounts, mp)
		}
	}
	slices.Sort(mounts)
	slices.Reverse(mounts)
	for _, mp := range mounts {
		if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount leftover %s: %v", mp, err)
		}
	}
}

func unescapeMountPath(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
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
