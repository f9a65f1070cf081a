package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"

	"github.com/nodelet/nodelet/hosttools"
	"github.com/nodelet/nodelet/test/testkit"
)

// joinSigningDuration is the control plane's --cluster-signing-duration
// here: the signer backdates by 5 minutes, so a certificate lives 8 and is
// renewed 0.6 to 2.2 minutes after it is issued (client-go's manager
// renews at 70 to 90% of the life).
const joinSigningDuration = "3m"

// TestNodeJoinsByToken is issue 26 on the node's side, kubeadm's join:
// `controlplane token create` gives a token and the CA's hash; `nodelet
// bootstrap-kubeconfig` refuses a control plane of another CA and a token
// the control plane did not sign cluster-info with, and otherwise writes
// the bootstrap kubeconfig; a nodelet with a token the control plane does
// not know is refused. A node started with nothing but the bootstrap
// kubeconfig gets its client certificate (requested by the token's
// user) and its serving certificate (requested as the node), both
// approved and issued, goes Ready, and serves kubectl logs, exec,
// port-forward and its metrics (with the certificates' TTLs).
// With certificates of minutes, both are renewed (the client one with
// the node's own credentials) while the node stays Ready and its API keeps
// serving.
func TestNodeJoinsByToken(t *testing.T) {
	testkit.RequireRoot(t, "a real node")
	cp := startControlPlane(t, t.TempDir(), freePort(t), "--cluster-signing-duration", joinSigningDuration)
	token, caHash := createJoinToken(t, cp)
	tokenID, _, _ := strings.Cut(token, ".")
	server := fmt.Sprintf("127.0.0.1:%d", cp.port)
	boot := filepath.Join(t.TempDir(), "bootstrap.conf")

	t.Run("another CA is refused", func(t *testing.T) {
		other := "sha256:" + strings.Repeat("0", 64)
		out, err := nodeletCommand("bootstrap-kubeconfig", "--server", server, "--token", token,
			"--discovery-token-ca-cert-hash", other, "--out", boot)
		if err == nil || !strings.Contains(out, caHash) || !strings.Contains(out, other) || !strings.Contains(out, "refusing") {
			t.Errorf("bootstrap-kubeconfig pinned to another CA: %v, output %q; want a refusal naming %s and %s", err, out, caHash, other)
		}
		if _, err := os.Stat(boot); !os.IsNotExist(err) {
			t.Errorf("a bootstrap kubeconfig was written: %v", err)
		}
	})
	t.Run("a wrong token is refused", func(t *testing.T) {
		wrongSecret := tokenID + "." + strings.Repeat("x", 16)
		out, err := nodeletCommand("bootstrap-kubeconfig", "--server", server, "--token", wrongSecret,
			"--discovery-token-ca-cert-hash", caHash, "--out", boot)
		if err == nil || !strings.Contains(out, "does not verify") || strings.Contains(out, wrongSecret) {
			t.Errorf("bootstrap-kubeconfig with a wrong secret: %v, output %q", err, out)
		}
		out, err = nodeletCommand("bootstrap-kubeconfig", "--server", server, "--token", "zzzzzz."+strings.Repeat("0", 16),
			"--discovery-token-ca-cert-hash", caHash, "--discovery-timeout", "2s", "--out", boot)
		if err == nil || !strings.Contains(out, `token id "zzzzzz" is unknown`) {
			t.Errorf("bootstrap-kubeconfig with an unknown token: %v, output %q", err, out)
		}
	})
	if out, err := nodeletCommand("bootstrap-kubeconfig", "--server", server, "--token", token,
		"--discovery-token-ca-cert-hash", caHash, "--out", boot); err != nil {
		t.Fatalf("nodelet bootstrap-kubeconfig: %v: %s", err, out)
	}
	if st, err := os.Stat(boot); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("bootstrap kubeconfig: %v, mode %v; want 0600", err, st.Mode().Perm())
	}
	t.Run("a nodelet with an unknown token is refused", func(t *testing.T) { testJoinRefused(t, boot, token) })

	node := startRealNodeWith(t, cp, "node-join", boot)
	testkit.Eventually(t, 90*time.Second, "node Ready", func() bool { return nodeReady(cp.clientset(), node.name) })
	testJoinCertificates(t, cp, node, tokenID)
	runPod(t, cp, "joined", "echo joined by token; mkdir /www; echo through port-forward > /www/index.html; exec httpd -f -p 8080 -h /www")
	testJoinedNodeServes(t, cp, node)
	cp = testJoinRotation(t, cp, node) // not a subtest: the restarted control plane lives as long as the test

	cp.must("delete", "pod", "joined", "--grace-period=0", "--wait=false")
	testkit.Eventually(t, 90*time.Second, "no pods", func() bool {
		out, _, _ := cp.kubectl("get", "pods", "-o", "name")
		return strings.TrimSpace(out) == ""
	})
	waitNoLeftovers(t, node)
}

// createJoinToken runs `controlplane token create` and returns its two
// lines: the token and the CA's hash.
func createJoinToken(t *testing.T, cp *controlPlane) (token, caHash string) {
	t.Helper()
	out, err := exec.Command(filepath.Join(binDir, "controlplane"), "token", "create", "--data-dir", cp.dataDir, "--ttl", "1h").Output()
	if err != nil {
		t.Fatalf("controlplane token create: %v: %s", err, out)
	}
	lines := strings.Fields(string(out))
	if len(lines) != 2 || !strings.HasPrefix(lines[1], "sha256:") {
		t.Fatalf("controlplane token create printed %q, want a token and sha256:HASH", out)
	}
	return lines[0], lines[1]
}

// nodeletCommand runs the nodelet binary on the host, within a minute.
func nodeletCommand(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(binDir, "nodelet"), args...).CombinedOutput()
	return string(out), err
}

// testJoinRefused starts a nodelet whose bootstrap kubeconfig carries a
// token the control plane does not know: it must stop before touching
// anything of the node (its containerd is a socket that does not exist),
// saying why, and write no kubeconfig.
func testJoinRefused(t *testing.T, boot, token string) {
	dir := t.TempDir()
	data, err := os.ReadFile(boot)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bootstrap.conf")
	if err := os.WriteFile(bad, []byte(strings.ReplaceAll(string(data), token, "zzzzzz."+strings.Repeat("0", 16))), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubelet.conf")
	out, err := nodeletCommand("--kubeconfig", kubeconfig, "--bootstrap-kubeconfig", bad, "--node-name", "node-refused",
		"--root-dir", filepath.Join(dir, "root"), "--containerd-address", filepath.Join(dir, "containerd.sock"),
		"--healthz-port", "0", "--port", "-1")
	if err == nil || !strings.Contains(out, "refused by the API server") || !strings.Contains(out, "Unauthorized") {
		t.Errorf("nodelet with an unknown token: %v, output %q; want a refusal", err, out)
	}
	if _, err := os.Stat(kubeconfig); !os.IsNotExist(err) {
		t.Errorf("a kubeconfig was written: %v", err)
	}
}

func nodeReady(cs kubernetes.Interface, name string) bool {
	n, err := cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	return err == nil && conditionTrue(n, corev1.NodeReady)
}

// issuedCSRs are the approved and issued requests for signer by user.
func issuedCSRs(t *testing.T, cp *controlPlane, signer, user string) []certificatesv1.CertificateSigningRequest {
	t.Helper()
	var list certificatesv1.CertificateSigningRequestList
	if err := json.Unmarshal([]byte(cp.must("get", "csr", "-o", "json")), &list); err != nil {
		t.Fatal(err)
	}
	var out []certificatesv1.CertificateSigningRequest
	for _, c := range list.Items {
		if c.Spec.SignerName != signer || c.Spec.Username != user || len(c.Status.Certificate) == 0 {
			continue
		}
		for _, cond := range c.Status.Conditions {
			if cond.Type == certificatesv1.CertificateApproved && cond.Status == corev1.ConditionTrue {
				out = append(out, c)
			}
		}
	}
	return out
}

// testJoinCertificates: the client certificate was asked for by the
// token's user, the serving one by the node, both approved and issued;
// the node's kubeconfig names the certificate directory's pair file.
func testJoinCertificates(t *testing.T, cp *controlPlane, node *realNode, tokenID string) {
	t.Helper()
	if got := issuedCSRs(t, cp, certificatesv1.KubeAPIServerClientKubeletSignerName, "system:bootstrap:"+tokenID); len(got) != 1 {
		t.Errorf("%d issued client certificate requests of system:bootstrap:%s, want 1", len(got), tokenID)
	}
	testkit.Eventually(t, 60*time.Second, "the serving certificate issued", func() bool {
		return len(issuedCSRs(t, cp, certificatesv1.KubeletServingSignerName, "system:node:"+node.name)) > 0
	})
	if out := cp.must("get", "csr"); !strings.Contains(out, "Approved,Issued") {
		t.Errorf("kubectl get csr:\n%s", out)
	}
	kubeconfig := filepath.Join(node.dir, "kubelet.conf")
	st, err := os.Stat(kubeconfig)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the node's kubeconfig: %v, mode %v; want 0600", err, st.Mode().Perm())
	}
	data, _ := os.ReadFile(kubeconfig)
	pair := filepath.Join(node.dir, "root", "pki", "kubelet-client-current.pem")
	if strings.Count(string(data), pair) != 2 || strings.Contains(string(data), "token") {
		t.Errorf("the node's kubeconfig does not name %s as its certificate and key:\n%s", pair, data)
	}
}

// testJoinedNodeServes: the API server reaches the node's API, which
// serves the certificate the control plane issued: logs, exec,
// port-forward and the node's metrics, the certificates' TTLs among them.
func testJoinedNodeServes(t *testing.T, cp *controlPlane, node *realNode) {
	t.Helper()
	var out, errOut string
	var err error
	testkit.Eventually(t, 60*time.Second, "kubectl logs through the node's API", func() bool {
		out, errOut, err = cp.kubectl("logs", "joined")
		return err == nil
	})
	if strings.TrimSpace(out) != "joined by token" {
		t.Errorf("kubectl logs joined: %q, %q", out, errOut)
	}
	if out := cp.must("exec", "joined", "--", "sh", "-c", "echo exec on $(hostname)"); strings.TrimSpace(out) != "exec on joined" {
		t.Errorf("kubectl exec: %q", out)
	}
	port := freePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pf := hosttools.CommandContext(ctx, "kubectl", "--kubeconfig", cp.kubeconfig, "port-forward", "pod/joined", fmt.Sprintf("%d:8080", port))
	var pfLogs lockedBuffer
	pf.Stdout, pf.Stderr = &pfLogs, &pfLogs
	if err := pf.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "the pod's page through port-forward", func() bool {
		body, _ := getLocal(fmt.Sprintf("http://127.0.0.1:%d/", port))
		return strings.TrimSpace(body) == "through port-forward"
	})
	cancel()
	pf.Wait()
	metrics := cp.must("get", "--raw", "/api/v1/nodes/"+node.name+"/proxy/metrics")
	for _, name := range []string{"kubelet_certificate_manager_client_ttl_seconds", "kubelet_certificate_manager_server_ttl_seconds"} {
		if line := grepMetric(metrics, name); line == "" || strings.HasSuffix(line, "+Inf") {
			t.Errorf("node metrics: %s = %q, want the seconds left", name, line)
		}
	}
}

// grepMetric is the sample line of an unlabelled metric.
func grepMetric(exposition, name string) string {
	for l := range strings.SplitSeq(exposition, "\n") {
		if strings.HasPrefix(l, name+" ") {
			return l
		}
	}
	return ""
}

// testJoinRotation waits for both certificates to be renewed (their pair
// files link to new files) while watching that the node never stops being
// Ready. Then, once the node's first client certificate has expired, it
// restarts the control plane, which cuts every connection: the node must
// come back on its renewed certificate (its Lease renewed after the
// restart), its API still serving. The renewals were asked for as the
// node. It returns the restarted control plane.
func testJoinRotation(t *testing.T, cp *controlPlane, node *realNode) *controlPlane {
	t.Helper()
	pki := filepath.Join(node.dir, "root", "pki")
	current := func(pair string) string {
		target, _ := os.Readlink(filepath.Join(pki, pair+"-current.pem"))
		return target
	}
	client, serving := current("kubelet-client"), current("kubelet-server")
	certs, err := certutil.CertsFromFile(client)
	if err != nil || serving == "" {
		t.Fatalf("pair files: client %q (%v), serving %q", client, err, serving)
	}
	firstExpiry := certs[0].NotAfter
	stopWatching := watchNodeReady(t, cp.clientset(), node.name)
	testkit.Eventually(t, 4*time.Minute, "both certificates renewed", func() bool {
		return current("kubelet-client") != client && current("kubelet-server") != serving
	})
	time.Sleep(time.Until(firstExpiry.Add(5 * time.Second)))
	cp.stop()
	cp = startControlPlane(t, cp.dataDir, cp.port, "--cluster-signing-duration", joinSigningDuration)
	restarted := time.Now()
	leases := cp.clientset().CoordinationV1().Leases(corev1.NamespaceNodeLease)
	testkit.Eventually(t, time.Minute, "the node's Lease renewed after the restart", func() bool {
		l, err := leases.Get(context.Background(), node.name, metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime != nil && l.Spec.RenewTime.After(restarted)
	})
	stopWatching()
	logs := node.logs.tail(1 << 20)
	for _, want := range []string{"client certificate rotated", "serving certificate renewed"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the nodelet did not log %q", want)
		}
	}
	if got := issuedCSRs(t, cp, certificatesv1.KubeAPIServerClientKubeletSignerName, "system:node:"+node.name); len(got) == 0 {
		t.Error("no client certificate renewal asked for by the node itself")
	}
	testJoinedNodeServes(t, cp, node)
	return cp
}

// watchNodeReady polls the node's Ready condition every second until
// stopped, and then fails the test if the node was ever seen not Ready
// (reads that fail, as while the control plane restarts, do not count).
func watchNodeReady(t *testing.T, cs kubernetes.Interface, name string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var notReady []string
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err == nil && !conditionTrue(n, corev1.NodeReady) {
				notReady = append(notReady, time.Now().Format(time.TimeOnly))
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	return func() {
		cancel()
		<-done
		if len(notReady) > 0 {
			t.Errorf("node %s was not Ready at %v", name, notReady)
		}
	}
}

func conditionTrue(n *corev1.Node, typ corev1.NodeConditionType) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == typ {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
