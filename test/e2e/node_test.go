package e2e

// A real node for end-to-end tests: a network namespace made by the test
// (a veth pair inside it gives the node an address that leads nowhere), a
// private containerd, and the nodelet binary running inside the namespace.
// The API server stays on the host's loopback; a forwarder listening on
// the namespace's loopback carries the nodelet's connections to it. The
// other way, the API server reaches the nodelet's HTTPS API at the node's
// address through a veth pair whose host end has the subnet's .254, so
// traffic only ever goes to 127.0.0.1 or into the namespace.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	libcgroups "github.com/opencontainers/cgroups"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/hosttools"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/runtimetest"
	"github.com/nodelet/nodelet/test/images"
	"github.com/nodelet/nodelet/test/testkit"
)

// realNode is one nodelet process with its own containerd and netns.
type realNode struct {
	t          testing.TB
	name       string
	netns      string // name under /run/netns
	ip         string // the node's address, on the subnet it shares with hostIP
	hostIP     string // the host end of the node's veth
	dir        string // root, logs, CNI config, netns dir, images
	cgroupRoot string // relative to each hierarchy, e.g. /nodelet-e2e-ab12
	ctdAddr    string
	args       []string
	cmd        *exec.Cmd
	logs       *lockedBuffer
	waitErr    chan error
}

const e2eNamespace = "nodelet-e2e" // containerd namespace of the tests' pods

func randomSuffix() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// startRealNode creates the namespace, containerd and the forwarder to the
// control plane, then starts the nodelet. Cleanup stops the nodelet, then
// removes the namespace, containerd (and whatever it still runs) and the
// cgroup tree; leftover mounts fail the test. extraArgs go to the nodelet.
func startRealNode(t testing.TB, cp *controlPlane, name string, extraArgs ...string) *realNode {
	t.Helper()
	return startRealNodeWith(t, cp, name, "", extraArgs...)
}

// startRealNodeWith is startRealNode; with a bootstrapKubeconfig the node
// starts with nothing but it, as a node joining by token: its kubeconfig
// (DIR/kubelet.conf) and serving certificate are the control plane's to
// issue.
func startRealNodeWith(t testing.TB, cp *controlPlane, name, bootstrapKubeconfig string, extraArgs ...string) *realNode {
	t.Helper()
	testkit.RequireRoot(t, "a real node makes a network namespace, a veth pair and cgroups, and runs containerd")
	suffix := randomSuffix()
	subnet := nodeSubnet(t)
	n := &realNode{t: t, name: name, netns: "nle2e-" + suffix, ip: subnet + ".1", hostIP: subnet + ".254",
		dir: t.TempDir(), cgroupRoot: "/nodelet-e2e-" + suffix, logs: &lockedBuffer{}}
	// Cleanups run last-registered first: the nodelet stops, the netns
	// goes, containerd kills what is left, then the pods' netns mounts of
	// a failed test and the cgroup tree go.
	t.Cleanup(func() { removeCgroupTree(t, n.cgroupRoot) })
	t.Cleanup(func() { unmountNetnsFiles(t, filepath.Join(n.dir, "root", "netns")) })
	t.Cleanup(func() { unmountBelow(t, filepath.Join(n.dir, "root", "pods")) })
	n.ctdAddr = runtimetest.StartContainerd(t)
	n.makeNetns(t, "nlh"+suffix)
	forwardIntoNetns(t, "/run/netns/"+n.netns, fmt.Sprintf("127.0.0.1:%d", cp.port))
	credentials := []string{"--kubeconfig", filepath.Join(n.dir, "kubelet.conf"), "--bootstrap-kubeconfig", bootstrapKubeconfig}
	if bootstrapKubeconfig == "" {
		certFile, keyFile := filepath.Join(n.dir, "serving.crt"), filepath.Join(n.dir, "serving.key")
		if out, err := exec.Command(filepath.Join(binDir, "controlplane"), "serving-cert", "--data-dir", cp.dataDir,
			"--node-name", name, "--host", n.ip, "--cert-file", certFile, "--key-file", keyFile).CombinedOutput(); err != nil {
			t.Fatalf("controlplane serving-cert: %v: %s", err, out)
		}
		credentials = []string{"--kubeconfig", cp.kubeconfig, "--tls-cert-file", certFile, "--tls-private-key-file", keyFile}
	}

	imageDir := filepath.Join(n.dir, "images")
	if _, _, err := images.Nginx(imageDir); err != nil {
		t.Fatal(err)
	}
	if _, _, err := images.Busybox(imageDir); err != nil {
		t.Fatal(err)
	}
	n.args = append([]string{"--net=/run/netns/" + n.netns, filepath.Join(binDir, "nodelet")}, credentials...)
	n.args = append(n.args, "--node-name", name, "--node-ip", n.ip,
		"--root-dir", filepath.Join(n.dir, "root"), "--pod-log-dir", filepath.Join(n.dir, "pods"),
		"--containerd-address", n.ctdAddr, "--containerd-namespace", e2eNamespace,
		"--cni-conf-dir", filepath.Join(n.dir, "net.d"), "--cni-bin-dir", "/usr/lib/cni",
		"--cgroup-driver", "cgroupfs", "--cgroup-root", n.cgroupRoot,
		"--pause-binary", filepath.Join(binDir, "pause"), "--image-dir", imageDir,
		"--system-reserved", "cpu=100m,memory=100Mi",
		// The host's disks are not the node's to manage: with the
		// nodelet's defaults (nodefs.available<10%, imagefs.available<15%)
		// a CI host whose disk is over 90% full evicts every test pod.
		// These are the thresholds upstream_cluster_test.go gives
		// upstream's kubelet. A test's own --eviction-hard in extraArgs
		// comes later and wins (the flag keeps its last value).
		"--eviction-hard=memory.available<100Mi,nodefs.available<1%,imagefs.available<1%,nodefs.inodesFree<1%")
	// The node serves the cluster DNS as installed nodes do; names it
	// forwards go to the node's own loopback (nothing answers there unless
	// a test runs a resolver), never to the host's resolvers.
	resolv := filepath.Join(n.dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 127.0.0.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	n.args = append(n.args, "--cluster-dns", "10.96.0.10", "--resolv-conf", resolv)
	// Benchmarks compare OCI runtimes: NODELET_BENCH_RUNTIME_BINARY=crun
	// makes the shim run crun instead of runc.
	if bin := os.Getenv(benchRuntimeBinaryEnv); bin != "" {
		n.args = append(n.args, "--runtime-binary", bin)
	}
	n.args = append(n.args, extraArgs...)
	n.start()
	t.Cleanup(n.stop)
	return n
}

// nodeSubnet picks a 10.99.X.0/24 that no host route covers yet (tests
// may run while another test's node exists).
func nodeSubnet(t testing.TB) string {
	t.Helper()
	for range 50 {
		b := make([]byte, 1)
		rand.Read(b)
		subnet := fmt.Sprintf("10.99.%d", 1+int(b[0])%250)
		out, err := hosttools.Command("ip", "route", "show", subnet+".0/24").Output()
		if err == nil && strings.TrimSpace(string(out)) == "" {
			return subnet
		}
	}
	t.Fatal("no free 10.99.X.0/24 for a test node")
	return ""
}

// makeNetns creates the node's namespace with a veth pair: the node's end
// (nv0, the node's address) inside, the other (hostLink, .254) on the
// host, so the API server can dial the nodelet.
// benchRuntimeBinaryEnv names the OCI runtime the benchmarks' nodes run
// (runc when unset).
const benchRuntimeBinaryEnv = "NODELET_BENCH_RUNTIME_BINARY"

func (n *realNode) makeNetns(t testing.TB, hostLink string) {
	t.Helper()
	ns := n.netns
	addNetns(t, ns)
	mustIP(t, "link", "add", hostLink, "type", "veth", "peer", "name", "nv0", "netns", ns)
	t.Cleanup(func() {
		// Gone with the namespace already, unless the namespace is held.
		hosttools.Command("ip", "link", "del", hostLink).Run()
	})
	mustIP(t, "addr", "add", n.hostIP+"/24", "dev", hostLink)
	mustIP(t, "link", "set", hostLink, "up")
	mustIP(t, "-n", ns, "addr", "add", n.ip+"/24", "dev", "nv0")
	mustIP(t, "-n", ns, "link", "set", "nv0", "up")
}

// addNetns creates the network namespace /run/netns/NAME with lo up and
// deletes it when the test ends.
func addNetns(t testing.TB, name string) {
	t.Helper()
	mustIP(t, "netns", "add", name)
	t.Cleanup(func() {
		if out, err := hosttools.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	mustIP(t, "-n", name, "link", "set", "lo", "up")
}

// mustIP runs ip(8) and fails the test if it fails.
func mustIP(t testing.TB, args ...string) {
	t.Helper()
	if out, err := hosttools.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// start runs the nodelet inside the namespace.
func (n *realNode) start() {
	n.cmd = hosttools.Command("nsenter", n.args...)
	n.cmd.Stdout, n.cmd.Stderr = n.logs, n.logs
	if path := os.Getenv("E2E_NODELET_LOG"); path != "" { // keep the logs of a passing run too
		if f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
			n.t.Cleanup(func() { f.Close() })
			n.cmd.Stdout, n.cmd.Stderr = io.MultiWriter(n.logs, f), io.MultiWriter(n.logs, f)
		}
	}
	if err := n.cmd.Start(); err != nil {
		n.t.Fatalf("start nodelet: %v", err)
	}
	n.waitErr = make(chan error, 1)
	go func(cmd *exec.Cmd, ch chan error) { ch <- cmd.Wait() }(n.cmd, n.waitErr)
}

// stop sends SIGTERM (which must not kill pods) and waits.
func (n *realNode) stop() {
	if n.cmd == nil {
		return
	}
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.waitErr:
	case <-time.After(30 * time.Second):
		n.t.Errorf("nodelet did not stop within 30s")
		n.cmd.Process.Kill()
		<-n.waitErr
	}
	n.cmd = nil
	if n.t.Failed() {
		n.t.Logf("nodelet %s logs:\n%s", n.name, n.logs.tail(200))
	}
}

// kill stops the nodelet with SIGKILL, as a crash would.
func (n *realNode) kill() {
	n.cmd.Process.Kill()
	<-n.waitErr
	n.cmd = nil
}

// inNetns runs a command inside the node's namespace.
func (n *realNode) inNetns(ctx context.Context, args ...string) (string, error) {
	cmd := hosttools.CommandContext(ctx, "nsenter", append([]string{"--net=/run/netns/" + n.netns}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// httpGet fetches a URL from inside the node's namespace (busybox wget,
// whose -T crashes in Debian's build, so the context bounds it).
func (n *realNode) httpGet(url string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return n.inNetns(ctx, "busybox", "wget", "-q", "-O-", url)
}

// leftovers lists what the node still holds of pods.
func (n *realNode) leftovers(t testing.TB) []string {
	t.Helper()
	return nodeFiles{ctdAddr: n.ctdAddr, ctdNamespace: e2eNamespace, rootDir: filepath.Join(n.dir, "root"),
		podLogDir: filepath.Join(n.dir, "pods"), netnsDir: filepath.Join(n.dir, "root", "netns"),
		cgroupRoot: n.cgroupRoot}.leftovers(t)
}

// nodeFiles says where a node keeps the state of its pods.
type nodeFiles struct {
	ctdAddr, ctdNamespace string
	rootDir, podLogDir    string
	netnsDir, cgroupRoot  string
}

// leftovers lists what the node still holds of pods: containers in its
// containerd namespace, pod netns files, IP reservations and CNI results,
// pod cgroups, pod directories (volumes) and log directories.
func (f nodeFiles) leftovers(t testing.TB) []string {
	t.Helper()
	var out []string
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if list, err := hosttools.CommandContext(ctx, "ctr", "--address", f.ctdAddr, "-n", f.ctdNamespace, "containers", "list", "-q").Output(); err != nil {
		out = append(out, fmt.Sprintf("ctr containers list: %v", err))
	} else if s := strings.TrimSpace(string(list)); s != "" {
		out = append(out, "containers: "+strings.ReplaceAll(s, "\n", " "))
	}
	for _, dir := range []string{
		f.netnsDir, filepath.Join(f.rootDir, "pods"), filepath.Join(f.rootDir, "pod-files"), f.podLogDir,
	} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	_ = filepath.WalkDir(filepath.Join(f.rootDir, "cni", "cache"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, "CNI cache "+p)
		}
		return nil
	})
	_ = filepath.WalkDir(filepath.Join(f.rootDir, "cni", "networks"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && net.ParseIP(d.Name()) != nil {
			out = append(out, "IP reservation "+p)
		}
		return nil
	})
	for _, h := range testkit.CgroupHierarchies(t) {
		for _, qos := range []string{"kubepods", "kubepods/burstable", "kubepods/besteffort"} {
			entries, _ := os.ReadDir(filepath.Join(h, f.cgroupRoot, qos))
			for _, e := range entries {
				if e.IsDir() && strings.HasPrefix(e.Name(), "pod") {
					out = append(out, filepath.Join(h, f.cgroupRoot, qos, e.Name()))
				}
			}
		}
	}
	return out
}

// holdsPod tells whether containerd still has a container of the pod or
// a pod cgroup of it exists.
func (n *realNode) holdsPod(t testing.TB, uid types.UID) bool {
	t.Helper()
	filter := fmt.Sprintf("labels.%q==%s", runtime.LabelPodUID, uid)
	list, err := hosttools.Command("ctr", "--address", n.ctdAddr, "-n", e2eNamespace, "containers", "list", "-q", filter).Output()
	if err != nil {
		t.Fatalf("ctr containers list %s: %v", filter, err)
	}
	if strings.TrimSpace(string(list)) != "" {
		return true
	}
	for _, h := range testkit.CgroupHierarchies(t) {
		for _, qos := range []string{"kubepods", "kubepods/burstable", "kubepods/besteffort"} {
			if _, err := os.Stat(filepath.Join(h, n.cgroupRoot, qos, "pod"+string(uid))); err == nil {
				return true
			}
		}
	}
	return false
}

// shims counts the containerd shim processes serving this node's
// containerd.
func (n *realNode) shims(t testing.TB) int {
	t.Helper()
	count := 0
	for _, p := range processes() {
		if strings.HasSuffix(p.args[0], "containerd-shim-runc-v2") && strings.Contains(p.cmdline, n.ctdAddr) {
			count++
		}
	}
	return count
}

// forwardIntoNetns listens on addr inside the namespace at nsPath and
// carries each connection to the same addr on the host's loopback, until
// the test ends.
func forwardIntoNetns(t testing.TB, nsPath, addr string) {
	t.Helper()
	forwardIntoNetnsTo(t, nsPath, addr, addr)
}

// forwardIntoNetnsTo listens on listen inside the namespace at nsPath and
// carries each connection to addr, dialled from the host's namespace.
func forwardIntoNetnsTo(t testing.TB, nsPath, listen, addr string) {
	t.Helper()
	ln, err := listenInNetns(nsPath, listen)
	if err != nil {
		t.Fatalf("listen on %s in %s: %v", listen, nsPath, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	track := func(c net.Conn, add bool) {
		mu.Lock()
		defer mu.Unlock()
		if add {
			conns[c] = true
		} else {
			delete(conns, c)
		}
	}
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { pipe(in, addr, track) })
		}
	})
}

func pipe(in net.Conn, addr string, track func(net.Conn, bool)) {
	out, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		in.Close()
		return
	}
	track(in, true)
	track(out, true)
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(out, in)
	go cp(in, out)
	<-done
	<-done
	in.Close()
	out.Close()
	track(in, false)
	track(out, false)
}

// inNetns runs f on a thread inside the namespace at nsPath; sockets f
// opens keep that namespace for life. The thread is never unlocked, so Go
// ends it instead of reusing it in the wrong namespace.
func inNetns(nsPath string, f func() error) error {
	ch := make(chan error, 1)
	go func() {
		goruntime.LockOSThread() // never unlocked: the thread dies with us
		h, err := netns.GetFromPath(nsPath)
		if err != nil {
			ch <- err
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			ch <- err
			return
		}
		ch <- f()
	}()
	return <-ch
}

// listenInNetns opens a TCP listener inside the namespace at nsPath.
func listenInNetns(nsPath, addr string) (ln net.Listener, err error) {
	err = inNetns(nsPath, func() error { ln, err = net.Listen("tcp", addr); return err })
	return ln, err
}

// unmountNetnsFiles unmounts the pod netns files a failed test left (a
// passing test has none: the leftovers check covers them).
func unmountNetnsFiles(t testing.TB, dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if err := unix.Unmount(p, unix.MNT_DETACH); err == nil {
			t.Logf("unmounted leftover netns %s", p)
		}
		os.Remove(p)
	}
}

// unmountBelow unmounts (lazily, deepest first) what a failed test left
// mounted below dir: the tmpfs of a secret or projected volume of a pod
// that was never deleted (a passing test has none: the leftovers check
// covers them), so that the test's temporary directory can go.
func unmountBelow(t testing.TB, dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Errorf("read mountinfo: %v", err)
		return
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			points = append(points, f[4])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(points)))
	for _, p := range points {
		if err := unix.Unmount(p, unix.MNT_DETACH); err == nil {
			t.Logf("unmounted leftover %s", p)
		}
	}
}

// removeCgroupTree removes the test's cgroup root from every hierarchy.
func removeCgroupTree(t testing.TB, root string) {
	for _, h := range testkit.CgroupHierarchies(t) {
		p := filepath.Join(h, root)
		if err := libcgroups.RemovePath(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("remove cgroup %s: %v", p, err)
		}
	}
}

// lockedBuffer collects a process's output safely while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) tail(lines int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	all := strings.Split(l.b.String(), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
