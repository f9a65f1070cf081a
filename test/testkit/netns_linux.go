package testkit

import (
	"bufio"
	"os"
	"os/exec"
	"regexp"
	goruntime "runtime"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/nodelet/nodelet/hosttools"
)

// Two ways to keep a test's network changes off the host:
//
//   - InNewNetns moves one thread, the test's, into a fresh namespace: for
//     code that acts through netlink on the calling thread and starts no
//     goroutine that must see the namespace.
//   - InNodeNetns re-executes the test binary in a fresh namespace: every
//     thread, every goroutine and every process the body starts
//     (containerd, CNI plugins, iptables) is inside, and all of it goes
//     with the child.

// InNewNetns runs f on the calling goroutine, its OS thread locked inside
// a new network namespace with lo up, then moves the thread back. The
// namespace vanishes with its last reference once f returns. Only this
// thread is inside: goroutines f starts run in the host's namespace. f
// may call t.Fatal.
func InNewNetns(t *testing.T, f func()) {
	t.Helper()
	RequireRoot(t, "creates a network namespace")
	goruntime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		goruntime.UnlockOSThread()
		t.Fatalf("current netns: %v", err)
	}
	defer orig.Close()
	ns, err := netns.New() // moves this thread into it
	if err != nil {
		goruntime.UnlockOSThread()
		t.Fatalf("new netns: %v", err)
	}
	defer func() {
		ns.Close()
		// A thread that cannot go back stays locked, so it ends with
		// the goroutine instead of returning to Go's pool in the
		// test's namespace.
		if err := netns.Set(orig); err != nil {
			t.Errorf("back to the original netns: %v", err)
			return
		}
		goruntime.UnlockOSThread()
	}()
	setLoopbackUp(t)
	f()
}

const (
	nodeChildEnv = "NODELET_TESTKIT_NETNS_CHILD" // the test the child runs
	nodeBaseEnv  = "NODELET_TESTKIT_NETNS_BASE"  // the directory parent and child share
)

// InNodeNetns runs body for the top-level test t in a child process: the
// test binary re-executed with -test.run for t alone, in a new network
// namespace (the "node") with lo up. base is a temporary directory parent
// and child share, as they share the mount namespace; when the child has
// ended, the parent unmounts whatever is still mounted under base (pod
// netns files of a failed or killed child). The parent fails unless the
// child ran t and passed; its output is logged.
//
// Everything before InNodeNetns in the test runs twice, in the parent and
// in the child: checks for root and for tools belong there.
func InNodeNetns(t *testing.T, body func(t *testing.T, base string)) {
	t.Helper()
	if os.Getenv(nodeChildEnv) == t.Name() {
		base := os.Getenv(nodeBaseEnv)
		if base == "" {
			t.Fatalf("%s set without %s", nodeChildEnv, nodeBaseEnv)
		}
		setLoopbackUp(t)
		body(t, base)
		return
	}
	RequireRoot(t, "creates a network namespace for the node")
	base := t.TempDir()
	t.Cleanup(func() { unmountUnder(t, base) }) // runs before TempDir's removal

	cmd := exec.CommandContext(t.Context(), os.Args[0],
		"-test.run=^"+regexp.QuoteMeta(t.Name())+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), nodeChildEnv+"="+t.Name(), nodeBaseEnv+"="+base)
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

func setLoopbackUp(t *testing.T) {
	t.Helper()
	lo, err := netlink.LinkByName("lo")
	if err == nil {
		err = netlink.LinkSetUp(lo)
	}
	if err != nil {
		t.Fatalf("set lo up in the new netns: %v", err)
	}
}

// unmountUnder detaches every mount below dir, deepest first.
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
		if mp := unescapeMountPath(fields[4]); strings.HasPrefix(mp, dir+"/") {
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

// unescapeMountPath undoes mountinfo's octal escapes of a mount point.
func unescapeMountPath(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// InPodNode is InNodeNetns for tests that run pods on a real node: it
// first requires root and the node's tools (containerd, runc, busybox,
// iptables, the bridge and host-local CNI plugins).
func InPodNode(t *testing.T, body func(t *testing.T, base string)) {
	t.Helper()
	RequireRoot(t, "containerd, netns, cgroups")
	if err := hosttools.Check("containerd", "runc", "busybox", "iptables", "/usr/lib/cni/bridge", "/usr/lib/cni/host-local"); err != nil {
		t.Fatal(err)
	}
	InNodeNetns(t, body)
}
