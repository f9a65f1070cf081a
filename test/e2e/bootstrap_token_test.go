package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/cluster-bootstrap/token/jws"

	"github.com/nodelet/nodelet/controlplane/bootstraptoken"
	"github.com/nodelet/nodelet/test/testkit"
)

// joinRequest is a PEM certificate request for cn in system:nodes with
// the given SANs, and its key.
func joinRequest(t *testing.T, cn string, dns []string, ips ...string) ([]byte, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn, Organization: []string{"system:nodes"}}, DNSNames: dns}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), key
}

// issue asks for a certificate as client and waits for it.
func issue(t *testing.T, client kubernetes.Interface, req []byte, key *ecdsa.PrivateKey, signer string, usages ...certificatesv1.KeyUsage) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name, uid, err := csr.RequestCertificateWithContext(ctx, client, req, "", signer, nil, usages, key)
	if err != nil {
		return nil, err
	}
	return csr.WaitForCertificate(ctx, client, name, uid)
}

// The control plane's side of joining by token, kubeadm's way, from
// outside: `controlplane token create` prints a token and the CA's hash;
// cluster-info is readable without credentials and signed for the token;
// the token may ask for a node client certificate, which is approved and
// issued, a wrong one is refused; the node then renews its client
// certificate and gets a serving certificate for its own names and
// addresses, while one naming another address waits for a human
// (`kubectl certificate deny`); no bootstrap token gets system:masters.
func TestBootstrapTokenJoinAPI(t *testing.T) {
	dir := t.TempDir()
	cp := startControlPlane(t, dir, freePort(t))
	out, err := exec.Command(filepath.Join(binDir, "controlplane"), "token", "create", "--data-dir", dir, "--ttl", "1h").Output()
	if err != nil {
		t.Fatalf("token create: %v", err)
	}
	lines := strings.Fields(string(out))
	if len(lines) != 2 {
		t.Fatalf("token create printed %q: want the token and the CA hash", out)
	}
	token, hash := lines[0], lines[1]
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(caPEM)
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil || bootstraptoken.CAHash(ca) != hash {
		t.Fatalf("printed hash %s, CA's %s (%v)", hash, bootstraptoken.CAHash(ca), err)
	}

	// cluster-info, as a node that trusts nothing yet reads it.
	anon := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	get := func(path string) (int, []byte) {
		resp, err := anon.Get(fmt.Sprintf("https://127.0.0.1:%d%s", cp.port, path))
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, body
	}
	id, secret, _ := strings.Cut(token, ".")
	testkit.Eventually(t, 30*time.Second, "cluster-info signed for the token", func() bool {
		code, body := get("/api/v1/namespaces/kube-public/configmaps/cluster-info")
		var cm corev1.ConfigMap
		if code != http.StatusOK || json.Unmarshal(body, &cm) != nil {
			return false
		}
		sig, ok := cm.Data["jws-kubeconfig-"+id]
		return ok && strings.Contains(cm.Data["kubeconfig"], "certificate-authority-data") &&
			jws.DetachedTokenIsValid(sig, cm.Data["kubeconfig"], id, secret)
	})
	if code, body := get("/api/v1/namespaces/kube-public/configmaps"); code != http.StatusUnauthorized {
		t.Errorf("anonymous list of kube-public's ConfigMaps: HTTP %d %s, want 401", code, body)
	}

	base := &rest.Config{Host: fmt.Sprintf("https://127.0.0.1:%d", cp.port), TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}}
	withToken := func(tok string) kubernetes.Interface {
		c := rest.CopyConfig(base)
		c.BearerToken = tok
		return kubernetes.NewForConfigOrDie(c)
	}
	clientUsages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	req, key := joinRequest(t, "system:node:join-1", nil)
	if _, err := issue(t, withToken(id+".0000000000000000"), req, key, certificatesv1.KubeAPIServerClientKubeletSignerName, clientUsages...); !apierrors.IsUnauthorized(err) {
		t.Errorf("a CSR with a wrong token secret: %v, want 401", err)
	}
	masters, mkey := withOrg(t, "evil", "system:masters")
	if _, err := issue(t, withToken(token), masters, mkey, certificatesv1.KubeAPIServerClientSignerName, clientUsages...); !apierrors.IsForbidden(err) {
		t.Errorf("a system:masters certificate through a bootstrap token: %v, want 403", err)
	}
	certPEM, err := issue(t, withToken(token), req, key, certificatesv1.KubeAPIServerClientKubeletSignerName, clientUsages...)
	if err != nil {
		t.Fatalf("the node's client certificate: %v", err)
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		t.Fatal(err)
	}
	asNode := rest.CopyConfig(base)
	asNode.CertData, asNode.KeyData = certPEM, keyPEM
	node := kubernetes.NewForConfigOrDie(asNode)
	ctx := context.Background()
	if _, err := node.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "join-1"},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "join-1"},
			{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the node registers with its new certificate: %v", err)
	}
	renewReq, renewKey := joinRequest(t, "system:node:join-1", nil)
	if _, err := issue(t, node, renewReq, renewKey, certificatesv1.KubeAPIServerClientKubeletSignerName, clientUsages...); err != nil {
		t.Errorf("the node renews its client certificate: %v", err)
	}
	servingUsages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
	servReq, servKey := joinRequest(t, "system:node:join-1", []string{"join-1"}, "127.0.0.1")
	serving, err := issue(t, node, servReq, servKey, certificatesv1.KubeletServingSignerName, servingUsages...)
	if err != nil {
		t.Fatalf("the node's serving certificate: %v", err)
	}
	if b, _ := pem.Decode(serving); b == nil {
		t.Errorf("serving certificate %q", serving)
	} else if c, err := x509.ParseCertificate(b.Bytes); err != nil || c.Subject.CommonName != "system:node:join-1" ||
		len(c.IPAddresses) != 1 || c.CheckSignatureFrom(ca) != nil {
		t.Errorf("serving certificate %+v (%v): want the node's, signed by the cluster CA", c.Subject, err)
	}

	// Another address: no automatic approval, a human decides.
	wideReq, wideKey := joinRequest(t, "system:node:join-1", []string{"join-1"}, "10.9.9.9")
	name, _, err := csr.RequestCertificateWithContext(ctx, node, wideReq, "", certificatesv1.KubeletServingSignerName, nil, servingUsages, wideKey)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if got := cp.must("get", "csr", name, "--no-headers", "-o", "custom-columns=C:.status.conditions[*].type"); strings.TrimSpace(got) != "<none>" {
		t.Errorf("a serving CSR for another address: conditions %q, want pending", got)
	}
	cp.must("certificate", "deny", name)
	table := cp.must("get", "csr")
	t.Logf("kubectl get csr:\n%s", table)
	if !strings.Contains(table, "Denied") || strings.Count(table, "Approved,Issued") != 3 ||
		!strings.Contains(table, "kubernetes.io/kubelet-serving") || !strings.Contains(table, "system:bootstrap:"+id) {
		t.Errorf("kubectl get csr:\n%s", table)
	}
}

// withOrg is a certificate request for cn in org.
func withOrg(t *testing.T, cn, org string) ([]byte, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn, Organization: []string{org}}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), key
}
