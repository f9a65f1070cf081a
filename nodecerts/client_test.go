package nodecerts

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
)

// testCA signs what the fake control plane issues.
type testCA struct {
	cert *x509.Certificate
	key  crypto.Signer
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue signs a certificate for the request's key and subject, valid
// from notBefore to notAfter.
func (ca *testCA) issue(t *testing.T, csrPEM []byte, notBefore, notAfter time.Time) []byte {
	t.Helper()
	block, _ := pem.Decode(csrPEM)
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: req.Subject,
		NotBefore: notBefore, NotAfter: notAfter, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		DNSNames: req.DNSNames, IPAddresses: req.IPAddresses}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, req.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// fakeControlPlane approves and signs every request on creation, keeping
// what it was asked.
func fakeControlPlane(t *testing.T, ca *testCA) (*fake.Clientset, *[]*certificatesv1.CertificateSigningRequest) {
	client := fake.NewClientset()
	var asked []*certificatesv1.CertificateSigningRequest
	client.PrependReactor("create", "certificatesigningrequests", func(a k8stesting.Action) (bool, runtime.Object, error) {
		csr := a.(k8stesting.CreateAction).GetObject().(*certificatesv1.CertificateSigningRequest)
		asked = append(asked, csr.DeepCopy())
		csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved,
			Status: "True", Reason: "AutoApproved"}}
		csr.Status.Certificate = ca.issue(t, csr.Spec.Request, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
		return false, nil, nil // the tracker stores it
	})
	return client, &asked
}

func TestBootstrapWritesTheCertificateAndKubeconfig(t *testing.T) {
	ca := newTestCA(t)
	client, asked := fakeControlPlane(t, ca)
	dir := t.TempDir()
	cfg := Config{NodeName: "n1", Kubeconfig: filepath.Join(dir, "kubelet.conf"), CertDir: filepath.Join(dir, "pki"), Log: quiet}
	boot := &rest.Config{Host: "https://cp.example:6443", TLSClientConfig: rest.TLSClientConfig{CAData: ca.pem}, BearerToken: testToken}
	if err := bootstrap(context.Background(), cfg, client, boot); err != nil {
		t.Fatal(err)
	}
	if len(*asked) != 1 {
		t.Fatalf("%d requests, want 1", len(*asked))
	}
	req := (*asked)[0]
	if req.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName || !strings.HasPrefix(req.Name, "node-csr-") ||
		!slices.Contains(req.Spec.Usages, certificatesv1.UsageClientAuth) {
		t.Errorf("request %s: signer %s, usages %v", req.Name, req.Spec.SignerName, req.Spec.Usages)
	}
	block, _ := pem.Decode(req.Spec.Request)
	parsed, _ := x509.ParseCertificateRequest(block.Bytes)
	if parsed.Subject.CommonName != "system:node:n1" || !slices.Equal(parsed.Subject.Organization, []string{"system:nodes"}) {
		t.Errorf("subject %v", parsed.Subject)
	}
	current := filepath.Join(cfg.CertDir, "kubelet-client-current.pem")
	rc, err := LoadRESTConfig(cfg.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Host != boot.Host || rc.CertFile != current || rc.KeyFile != current || string(rc.CAData) != string(ca.pem) || rc.BearerToken != "" {
		t.Errorf("kubeconfig: host %s, cert %s, key %s, CA %d bytes, token %q", rc.Host, rc.CertFile, rc.KeyFile, len(rc.CAData), rc.BearerToken)
	}
	for _, p := range []string{cfg.Kubeconfig, current} {
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v, want 0600", p, err, st.Mode().Perm())
		}
	}
	if _, err := os.Stat(filepath.Join(cfg.CertDir, pendingKey)); !os.IsNotExist(err) {
		t.Errorf("the pending key is still there: %v", err)
	}
	if ok, err := clientCertValid(cfg.Kubeconfig, time.Now()); !ok || err != nil {
		t.Errorf("the written kubeconfig is not valid: %v, %v", ok, err)
	}
}

func TestBootstrapReusesThePendingKey(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	cfg := Config{NodeName: "n1", Kubeconfig: filepath.Join(dir, "kubelet.conf"), CertDir: dir, Log: quiet}
	// A first attempt was refused before it was answered: its key stays.
	refusing := fake.NewClientset()
	refusing.PrependReactor("create", "certificatesigningrequests", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewUnauthorized("bad token")
	})
	boot := &rest.Config{Host: "https://cp:6443"}
	if err := bootstrap(context.Background(), cfg, refusing, boot); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("err = %v, want refused", err)
	}
	key, err := os.ReadFile(filepath.Join(dir, pendingKey))
	if err != nil {
		t.Fatal(err)
	}
	client, asked := fakeControlPlane(t, ca)
	if err := bootstrap(context.Background(), cfg, client, boot); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "kubelet-client-current.pem"))
	if !strings.Contains(string(data), strings.TrimSpace(string(key))) {
		t.Error("the certificate was asked for with another key than the pending one")
	}
	if len(*asked) != 1 {
		t.Errorf("%d requests", len(*asked))
	}
}

func TestRequestNameDigestsKeySubjectAndUsages(t *testing.T) {
	k1, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	k2, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	usages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	a, _ := requestName(k1.Public(), nodeSubject("n1"), usages)
	b, _ := requestName(k1.Public(), nodeSubject("n1"), usages)
	if a != b {
		t.Errorf("the same request has two names: %s, %s", a, b)
	}
	for _, other := range []func() (string, error){
		func() (string, error) { return requestName(k2.Public(), nodeSubject("n1"), usages) },
		func() (string, error) { return requestName(k1.Public(), nodeSubject("n2"), usages) },
		func() (string, error) { return requestName(k1.Public(), nodeSubject("n1"), usages[:1]) },
	} {
		if c, _ := other(); c == a {
			t.Errorf("a different request has the same name %s", c)
		}
	}
}
