package e2e

// Upstream Kubernetes on this machine, for the benchmarks that compare the
// nodelet with it: etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler on the host's loopback, and one node (kubelet with a
// private containerd and its CRI plugin, the distribution's CNI plugins)
// in a network namespace of the test's own, as realNode does for ours.
// The binaries are built from the Go module proxy by
// scripts/bench-upstream.sh, which puts them on PATH and sets
// NODELET_UPSTREAM_BIN; without it the upstream benchmarks are skipped.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/hosttools"
	"github.com/nodelet/nodelet/runtime/containerd"
	"github.com/nodelet/nodelet/runtime/runtimetest"
	"github.com/nodelet/nodelet/test/images"
	"github.com/nodelet/nodelet/test/testkit"
)

// upstreamTools are the programs scripts/bench-upstream.sh builds.
var upstreamTools = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet"}

// requireUpstream skips the benchmark unless scripts/bench-upstream.sh
// runs it, and fails when a binary is missing.
func requireUpstream(b testing.TB) {
	b.Helper()
	if os.Getenv("NODELET_UPSTREAM_BIN") == "" {
		b.Skip("upstream Kubernetes: run through scripts/bench-upstream.sh (NODELET_UPSTREAM_BIN unset)")
	}
	if err := hosttools.Check(upstreamTools...); err != nil {
		b.Fatal(err)
	}
	for _, tool := range upstreamTools {
		path, _ := hosttools.Path(tool)
		if filepath.Dir(path) != filepath.Clean(os.Getenv("NODELET_UPSTREAM_BIN")) {
			b.Fatalf("%s on PATH is %s, not the build in %s", tool, path, os.Getenv("NODELET_UPSTREAM_BIN"))
		}
	}
}

// upstreamPKI is the cluster's certificates and keys, made for the test.
type upstreamPKI struct {
	dir                      string
	caCert, caKey            string
	serverCert, serverKey    string // the API server's, for 127.0.0.1
	adminCert, adminKey      string // O=system:masters
	serviceAccountKey, saPub string
	caTemplate               *x509.Certificate
	caSigner                 *ecdsa.PrivateKey
}

func writePKI(b testing.TB, dir string) *upstreamPKI {
	b.Helper()
	p := &upstreamPKI{dir: dir}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bench-upstream-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	p.caTemplate, p.caSigner = ca, caKey
	p.caCert, p.caKey = p.writeCert(b, "ca", ca, ca, caKey, caKey)
	p.serverCert, p.serverKey = p.issue(b, "apiserver", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		DNSNames:    []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	p.adminCert, p.adminKey = p.issue(b, "admin", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "bench-admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		b.Fatal(err)
	}
	p.serviceAccountKey = writePEM(b, filepath.Join(dir, "sa.key"), "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey))
	pub, _ := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	p.saPub = writePEM(b, filepath.Join(dir, "sa.pub"), "PUBLIC KEY", pub)
	return p
}

var serial int64 = 1

func (p *upstreamPKI) issue(b testing.TB, name string, tmpl *x509.Certificate) (string, string) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	serial++
	tmpl.SerialNumber = big.NewInt(serial)
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	return p.writeCert(b, name, tmpl, p.caTemplate, key, p.caSigner)
}

func (p *upstreamPKI) writeCert(b testing.TB, name string, tmpl, parent *x509.Certificate, key, signer *ecdsa.PrivateKey) (string, string) {
	b.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		b.Fatalf("certificate %s: %v", name, err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	return writePEM(b, filepath.Join(p.dir, name+".crt"), "CERTIFICATE", der),
		writePEM(b, filepath.Join(p.dir, name+".key"), "EC PRIVATE KEY", keyDER)
}

func writePEM(b testing.TB, path, typ string, der []byte) string {
	b.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		b.Fatal(err)
	}
	return path
}

// kubeconfig writes an admin kubeconfig for server.
func (p *upstreamPKI) kubeconfig(b testing.TB, path, server string) string {
	b.Helper()
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: bench
  cluster: {server: %q, certificate-authority: %q}
users:
- name: admin
  user: {client-certificate: %q, client-key: %q}
contexts:
- name: bench
  context: {cluster: bench, user: admin}
current-context: bench
`, server, p.caCert, p.adminCert, p.adminKey)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	return path
}

// upstreamProc is one upstream process, its output in a log file.
type upstreamProc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// startUpstreamProc starts cmd with its output in dir/NAME.log; cleanup
// stops it with SIGTERM (SIGKILL after 30 s) and, on a failed test, logs
// the end of its log.
func startUpstreamProc(b testing.TB, dir, name string, cmd *exec.Cmd) *upstreamProc {
	b.Helper()
	p := &upstreamProc{name: name, cmd: cmd, log: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	f, err := os.Create(p.log)
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		b.Fatalf("start %s: %v", name, err)
	}
	go func() { p.err = cmd.Wait(); f.Close(); close(p.done) }()
	b.Cleanup(func() {
		p.stop(b)
		if b.Failed() {
			p.logTail(b, 40)
		}
	})
	return p
}

func (p *upstreamProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *upstreamProc) stop(b testing.TB) {
	if p.exited() {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		b.Errorf("%s did not stop within 30s of SIGTERM; killing it", p.name)
		p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *upstreamProc) logTail(b testing.TB, n int) {
	data, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	b.Logf("%s log (last %d lines):\n%s", p.name, len(lines), strings.Join(lines, "\n"))
}

// waitUp polls ready until it holds, failing when p exits or after d.
func (p *upstreamProc) waitUp(b testing.TB, d time.Duration, ready func() bool) {
	b.Helper()
	deadline := time.Now().Add(d)
	for !ready() {
		if p.exited() {
			p.logTail(b, 40)
			b.Fatalf("%s exited at start: %v", p.name, p.err)
		}
		if time.Now().After(deadline) {
			p.logTail(b, 40)
			b.Fatalf("%s not up after %s", p.name, d)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// upstreamControlPlane is etcd and upstream's control plane on loopback.
type upstreamControlPlane struct {
	*controlPlane // kubectl with the admin kubeconfig (no process of ours)
	pki           *upstreamPKI
	procs         []*upstreamProc
}

// startUpstreamControlPlane starts etcd, kube-apiserver (AlwaysAllow,
// client certificates, service account keys of the test),
// kube-controller-manager and kube-scheduler, all with their defaults
// otherwise, and waits until the API server is ready and the default
// namespace has its service account (pods are refused before).
func startUpstreamControlPlane(b testing.TB) *upstreamControlPlane {
	b.Helper()
	requireUpstream(b)
	dir := b.TempDir()
	pki := writePKI(b, dir)
	etcdClient, etcdPeer := freePort(b), freePort(b)
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdClient)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPeer)
	etcd := startUpstreamProc(b, dir, "etcd", hosttools.Command("etcd", "--name", "bench",
		"--data-dir", filepath.Join(dir, "etcd"), "--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL, "--initial-cluster", "bench="+peerURL,
		"--listen-metrics-urls", fmt.Sprintf("http://127.0.0.1:%d", freePort(b)), "--log-level", "warn"))

	port := freePort(b)
	u := &upstreamControlPlane{pki: pki, procs: []*upstreamProc{etcd}}
	u.controlPlane = &controlPlane{t: b, dataDir: dir, port: port,
		kubeconfig: pki.kubeconfig(b, filepath.Join(dir, "admin.kubeconfig"), fmt.Sprintf("https://127.0.0.1:%d", port))}
	apiserver := startUpstreamProc(b, dir, "kube-apiserver", hosttools.Command("kube-apiserver",
		"--etcd-servers", etcdURL, "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
		"--secure-port", fmt.Sprint(port), "--cert-dir", filepath.Join(dir, "apiserver-certs"),
		"--tls-cert-file", pki.serverCert, "--tls-private-key-file", pki.serverKey, "--client-ca-file", pki.caCert,
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", pki.saPub, "--service-account-signing-key-file", pki.serviceAccountKey,
		"--service-cluster-ip-range", "10.96.0.0/16", "--authorization-mode", "AlwaysAllow",
		// 127.0.0.1 may not be written into the kubernetes Endpoints.
		"--endpoint-reconciler-type", "none",
		// exec, attach and logs dial the node by its address in the
		// test's namespace: nothing resolves the node's hostname.
		"--kubelet-preferred-address-types", "InternalIP"))
	u.procs = append(u.procs, apiserver)
	apiserver.waitUp(b, 2*time.Minute, func() bool {
		out, _, err := u.kubectl("get", "--raw", "/readyz")
		return err == nil && strings.TrimSpace(out) == "ok"
	})
	u.procs = append(u.procs,
		startUpstreamProc(b, dir, "kube-controller-manager", hosttools.Command("kube-controller-manager",
			"--kubeconfig", u.kubeconfig, "--authentication-kubeconfig", u.kubeconfig, "--authorization-kubeconfig", u.kubeconfig,
			"--leader-elect=false", "--bind-address", "127.0.0.1", "--secure-port", fmt.Sprint(freePort(b)),
			"--cert-dir", filepath.Join(dir, "kcm-certs"),
			"--service-account-private-key-file", pki.serviceAccountKey, "--root-ca-file", pki.caCert,
			"--service-cluster-ip-range", "10.96.0.0/16")),
		startUpstreamProc(b, dir, "kube-scheduler", hosttools.Command("kube-scheduler",
			"--kubeconfig", u.kubeconfig, "--authentication-kubeconfig", u.kubeconfig, "--authorization-kubeconfig", u.kubeconfig,
			"--leader-elect=false", "--bind-address", "127.0.0.1", "--secure-port", fmt.Sprint(freePort(b)),
			"--cert-dir", filepath.Join(dir, "scheduler-certs"))))
	u.procs[2].waitUp(b, time.Minute, func() bool {
		_, _, err := u.kubectl("get", "serviceaccount", "default")
		return err == nil
	})
	return u
}

// upstreamNode is kubelet with its containerd in a network namespace.
type upstreamNode struct {
	name, netns, ip, dir, cgroupRoot, ctdAddr string
	kubelet                                   *upstreamProc
	kubeletArgs                               []string // nsenter and the kubelet's command line
}

// upstreamCRIConfig is the CRI plugin of the node's containerd: the
// project's pause image, runc with cgroupfs, the distribution's CNI
// plugins, and the OOM score clamped (lowering it is refused here).
const upstreamCRIConfig = `
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
`

// upstreamCNIConfig is a bridge network with masquerade, as the nodelet's,
// its address book kept in the test's directory.
const upstreamCNIConfig = `{
  "cniVersion": "1.0.0",
  "name": "bench",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.88.0.0/16"}]], "routes": [{"dst": "0.0.0.0/0"}], "dataDir": %q}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`

// upstreamKubeletConfig: cgroup v1 allowed, cgroupfs under the test's own
// cgroup root, the system reservation of the nodelet's benchmarks, the
// OOM score left alone, eviction and image GC thresholds out of the way
// of a shared disk, no read-only port.
const upstreamKubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %q
cgroupsPerQOS: true
containerRuntimeEndpoint: %q
failSwapOn: false
oomScoreAdj: 0
resolvConf: %q
podLogsDir: %q
address: %q
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
systemReserved: {cpu: 100m, memory: 100Mi}
evictionHard: {memory.available: 100Mi, nodefs.available: 1%%, imagefs.available: 1%%, nodefs.inodesFree: 1%%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`

// startUpstreamNode starts the node and waits until it is Ready. Cleanup
// stops the kubelet (which leaves its pods), tears every pod sandbox down
// through CRI (network, netns), lets runtimetest remove containerd and
// what it still holds, unmounts what the kubelet left in its root
// directory, removes the namespace and the cgroup tree, and fails on a
// pod network namespace left on the host.
func startUpstreamNode(b testing.TB, u *upstreamControlPlane, name string) *upstreamNode {
	b.Helper()
	return startUpstreamNodeWith(b, u, name, "")
}

// startUpstreamNodeWith is startUpstreamNode with extraConfig (YAML lines)
// appended to the kubelet's configuration.
func startUpstreamNodeWith(b testing.TB, u *upstreamControlPlane, name, extraConfig string) *upstreamNode {
	b.Helper()
	testkit.RequireRoot(b, "an upstream node makes a network namespace and cgroups, and runs containerd and the kubelet")
	suffix := randomSuffix()
	subnet := nodeSubnet(b)
	n := &upstreamNode{name: name, netns: "nlup-" + suffix, ip: subnet + ".1", dir: b.TempDir(), cgroupRoot: "/nodelet-up-" + suffix}
	b.Cleanup(func() { removeCgroupTree(b, n.cgroupRoot) })
	makeCgroupRoot(b, n.cgroupRoot)
	netnsBefore := hostNetns()
	b.Cleanup(func() { checkHostNetns(b, netnsBefore) })
	node := &realNode{t: b, netns: n.netns, ip: n.ip, hostIP: subnet + ".254"}
	node.makeNetns(b, "nluh"+suffix)
	forwardIntoNetns(b, "/run/netns/"+n.netns, fmt.Sprintf("127.0.0.1:%d", u.port))
	rootDir := filepath.Join(n.dir, "kubelet")
	b.Cleanup(func() { unmountUnder(b, rootDir) })

	netConf := filepath.Join(n.dir, "net.d")
	if err := os.MkdirAll(netConf, 0o755); err != nil {
		b.Fatal(err)
	}
	writeFile(b, filepath.Join(netConf, "10-bench.conflist"), fmt.Sprintf(upstreamCNIConfig, filepath.Join(n.dir, "cni-ipam")))
	n.ctdAddr = runtimetest.StartContainerdWith(b, runtimetest.Options{
		NetNS: "/run/netns/" + n.netns,
		CRI:   fmt.Sprintf(upstreamCRIConfig, images.PauseRef, netConf),
	})
	b.Cleanup(func() { teardownSandboxes(b, n.ctdAddr) })
	importUpstreamImages(b, n.ctdAddr, filepath.Join(n.dir, "images"))

	resolv := filepath.Join(n.dir, "resolv.conf")
	writeFile(b, resolv, "nameserver 127.0.0.1\n")
	config := filepath.Join(n.dir, "kubelet.yaml")
	writeFile(b, config, fmt.Sprintf(upstreamKubeletConfig, n.cgroupRoot, "unix://"+n.ctdAddr, resolv,
		filepath.Join(n.dir, "pods"), n.ip)+extraConfig)
	n.kubeletArgs = []string{"--net=/run/netns/" + n.netns,
		"kubelet", "--config", config, "--kubeconfig", u.kubeconfig, "--root-dir", rootDir,
		"--hostname-override", name, "--node-ip", n.ip}
	n.kubelet = startUpstreamProc(b, n.dir, "kubelet", hosttools.Command("nsenter", n.kubeletArgs...))
	n.kubelet.waitUp(b, 2*time.Minute, func() bool {
		out, _, _ := u.kubectl("get", "node", name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True"
	})
	return n
}

// startKubelet starts a stopped kubelet again with the same command line
// (its pods kept running), without waiting for anything.
func (n *upstreamNode) startKubelet(b testing.TB) {
	b.Helper()
	n.kubelet = startUpstreamProc(b, n.dir, "kubelet", hosttools.Command("nsenter", n.kubeletArgs...))
}

// makeCgroupRoot creates root in every cgroup hierarchy: the kubelet
// refuses a cgroupRoot that does not exist. A v1 cpuset gets its parent's
// CPUs and memory nodes (a new cpuset has none).
func makeCgroupRoot(b testing.TB, root string) {
	b.Helper()
	for _, h := range testkit.CgroupHierarchies(b) {
		p := filepath.Join(h, root)
		if err := os.MkdirAll(p, 0o755); err != nil {
			b.Fatalf("cgroup %s: %v", p, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(h, f)); err == nil {
				if err := os.WriteFile(filepath.Join(p, f), v, 0o644); err != nil {
					b.Fatalf("cgroup %s: %v", filepath.Join(p, f), err)
				}
			}
		}
	}
}

func writeFile(b testing.TB, path, data string) {
	b.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		b.Fatal(err)
	}
}

// importUpstreamImages loads the test images (busybox, nginx, the pause
// image) into containerd's k8s.io namespace, where the CRI plugin looks.
func importUpstreamImages(b testing.TB, addr, dir string) {
	b.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	busybox, _, err := images.Busybox(dir)
	if err != nil {
		b.Fatal(err)
	}
	nginx, _, err := images.Nginx(dir)
	if err != nil {
		b.Fatal(err)
	}
	pause, _, err := images.Pause(dir, filepath.Join(binDir, "pause"))
	if err != nil {
		b.Fatal(err)
	}
	// The CRI plugin unpacks with overlayfs; a runtime in its namespace
	// imports there.
	rt, err := containerd.New(context.Background(), containerd.Config{Address: addr, Namespace: "k8s.io", SnapshotterName: "overlayfs"})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	for _, archive := range []string{busybox, nginx, pause} {
		if _, err := rt.ImportArchive(context.Background(), archive); err != nil {
			b.Fatal(err)
		}
	}
}

// teardownSandboxes stops and removes every pod sandbox through CRI, as
// the kubelet would: the CRI plugin deletes each pod's network (CNI DEL)
// and its network namespace file.
func teardownSandboxes(b testing.TB, addr string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Errorf("CRI at %s: %v", addr, err)
		return
	}
	defer conn.Close()
	rs := runtimeapi.NewRuntimeServiceClient(conn)
	list, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		b.Errorf("CRI list sandboxes: %v", err)
		return
	}
	for _, s := range list.Items {
		if _, err := rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: s.Id}); err != nil {
			b.Errorf("CRI stop sandbox %s: %v", s.Id, err)
		}
		if _, err := rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: s.Id}); err != nil {
			b.Errorf("CRI remove sandbox %s: %v", s.Id, err)
		}
	}
}

// runningTasks counts the node's running containers (pause included).
func (n *upstreamNode) runningTasks(b testing.TB) int {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+n.ctdAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	list, err := runtimeapi.NewRuntimeServiceClient(conn).ListContainers(ctx, &runtimeapi.ListContainersRequest{
		Filter: &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}})
	if err != nil {
		b.Fatalf("CRI list containers: %v", err)
	}
	return len(list.Containers)
}

// hostNetns lists the network namespace files in /run/netns.
func hostNetns() map[string]bool {
	entries, _ := os.ReadDir("/run/netns")
	out := map[string]bool{}
	for _, e := range entries {
		out[e.Name()] = true
	}
	return out
}

// checkHostNetns fails on a CRI pod namespace (cni-*) that appeared during
// the test and is still there, and removes it.
func checkHostNetns(b testing.TB, before map[string]bool) {
	for name := range hostNetns() {
		if before[name] || !strings.HasPrefix(name, "cni-") {
			continue
		}
		b.Errorf("pod network namespace /run/netns/%s left behind; removing it", name)
		if out, err := hosttools.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			b.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	}
}

// unmountUnder unmounts what is mounted at or below dir (deepest first)
// and fails the test on anything below dir. dir itself is the kubelet's
// root directory, which the kubelet bind-mounts onto itself (shared
// propagation) and leaves mounted when it exits.
func unmountUnder(b testing.TB, dir string) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		b.Error(err)
		return
	}
	var mounts []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			mounts = append(mounts, f[4])
		}
	}
	for i := len(mounts) - 1; i >= 0; i-- {
		if mounts[i] != dir {
			b.Errorf("mount left under %s: %s; unmounting it", dir, mounts[i])
		}
		if err := syscall.Unmount(mounts[i], syscall.MNT_DETACH); err != nil {
			b.Errorf("unmount %s: %v", mounts[i], err)
		}
	}
}
