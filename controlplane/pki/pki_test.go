package pki

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clientcmdlatest "k8s.io/client-go/tools/clientcmd/api/latest"
)

func testConfig(t *testing.T, hosts ...string) Config {
	t.Helper()
	return Config{
		Dir:          filepath.Join(t.TempDir(), "pki"),
		Hosts:        hosts,
		APIServerURL: "https://127.0.0.1:6443",
	}
}

func mustEnsure(t *testing.T, cfg Config, now time.Time) *Bundle {
	t.Helper()
	b, err := ensure(cfg, now)
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	return b
}

func readFile(t *testing.T, dir, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func servingCert(t *testing.T, b *Bundle) *x509.Certificate {
	t.Helper()
	_, cert, err := readCert(b.ServingCertFile)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// loadKubeconfig decodes like clientcmd.Load (same codec, same target
// type); clientcmd itself is not imported to keep spf13/pflag out of go.mod.
func loadKubeconfig(t *testing.T, data []byte) *clientcmdapi.Config {
	t.Helper()
	obj, err := runtime.Decode(clientcmdlatest.Codec, data)
	if err != nil {
		t.Fatalf("decode kubeconfig: %v", err)
	}
	kc, ok := obj.(*clientcmdapi.Config)
	if !ok {
		t.Fatalf("decoded %T, want *api.Config", obj)
	}
	return kc
}

// restConfig builds the client config kubectl would from kc.
func restConfig(kc *clientcmdapi.Config) *rest.Config {
	ctx := kc.Contexts[kc.CurrentContext]
	cluster, user := kc.Clusters[ctx.Cluster], kc.AuthInfos[ctx.AuthInfo]
	return &rest.Config{
		Host: cluster.Server,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   cluster.CertificateAuthorityData,
			CertData: user.ClientCertificateData,
			KeyData:  user.ClientKeyData,
		},
	}
}

func TestEnsureIsIdempotent(t *testing.T) {
	cfg := testConfig(t)
	now := time.Now()
	b1 := mustEnsure(t, cfg, now)
	names := []string{CACertName, CAKeyName, ServingCertName, ServingKeyName, AdminKubeconfigName}
	before := map[string][]byte{}
	for _, n := range names {
		before[n] = readFile(t, cfg.Dir, n)
	}
	b2 := mustEnsure(t, cfg, now.Add(time.Minute))
	for _, n := range names {
		if !bytes.Equal(before[n], readFile(t, cfg.Dir, n)) {
			t.Errorf("%s changed on second Ensure", n)
		}
	}
	if !b1.CACert.Equal(b2.CACert) {
		t.Error("CA certificate differs between runs")
	}
	if b1.CACert.Subject.CommonName != "nodelet-ca" || !b1.CACert.IsCA {
		t.Errorf("CA subject %q IsCA=%v", b1.CACert.Subject.CommonName, b1.CACert.IsCA)
	}

	assertMode(t, cfg.Dir, 0o700)
	for _, n := range []string{CAKeyName, ServingKeyName, AdminKubeconfigName} {
		assertMode(t, filepath.Join(cfg.Dir, n), 0o600)
	}
	tmps, _ := filepath.Glob(filepath.Join(cfg.Dir, ".*.tmp-*"))
	if len(tmps) != 0 {
		t.Errorf("temporary files left behind: %v", tmps)
	}
}

func assertMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != want {
		t.Errorf("%s mode %o, want %o", path, got, want)
	}
}

func TestServingSANs(t *testing.T) {
	cfg := testConfig(t, "api.example.com", "10.11.12.13", " ", "2001:db8::7")
	b := mustEnsure(t, cfg, time.Now())
	cert := servingCert(t, b)

	hostname, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	wantDNS := append(slices.Clone(defaultDNSNames), strings.ToLower(hostname), "api.example.com")
	for _, name := range wantDNS {
		if !slices.Contains(cert.DNSNames, name) {
			t.Errorf("DNS SAN %q missing from %v", name, cert.DNSNames)
		}
	}
	for _, ip := range []string{"127.0.0.1", "::1", "10.11.12.13", "2001:db8::7"} {
		if !slices.ContainsFunc(cert.IPAddresses, net.ParseIP(ip).Equal) {
			t.Errorf("IP SAN %s missing from %v", ip, cert.IPAddresses)
		}
	}
	if !slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
		t.Errorf("serving cert ExtKeyUsage %v lacks ServerAuth", cert.ExtKeyUsage)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: b.CAPool(), DNSName: "kubernetes.default.svc"}); err != nil {
		t.Errorf("serving cert does not verify: %v", err)
	}
	if d := time.Until(cert.NotAfter); d < 364*24*time.Hour || d > 366*24*time.Hour {
		t.Errorf("serving cert valid for %s, want about a year", d)
	}
}

func TestNewHostReissuesServingCertOnly(t *testing.T) {
	cfg := testConfig(t)
	b1 := mustEnsure(t, cfg, time.Now())
	caBefore := readFile(t, cfg.Dir, CACertName)
	keyBefore := readFile(t, cfg.Dir, ServingKeyName)
	certBefore := readFile(t, cfg.Dir, ServingCertName)

	cfg.Hosts = []string{"new.example.com"}
	b2 := mustEnsure(t, cfg, time.Now())
	if bytes.Equal(certBefore, readFile(t, cfg.Dir, ServingCertName)) {
		t.Fatal("serving cert not reissued after adding a host")
	}
	if !slices.Contains(servingCert(t, b2).DNSNames, "new.example.com") {
		t.Error("new host missing from reissued serving cert")
	}
	if !bytes.Equal(caBefore, readFile(t, cfg.Dir, CACertName)) || !b1.CACert.Equal(b2.CACert) {
		t.Error("CA changed when adding a host")
	}
	if !bytes.Equal(keyBefore, readFile(t, cfg.Dir, ServingKeyName)) {
		t.Error("serving key changed when adding a host")
	}

	// Dropping the host again keeps the (still covering) certificate.
	certAfter := readFile(t, cfg.Dir, ServingCertName)
	cfg.Hosts = nil
	mustEnsure(t, cfg, time.Now())
	if !bytes.Equal(certAfter, readFile(t, cfg.Dir, ServingCertName)) {
		t.Error("serving cert reissued although it still covers every required SAN")
	}
}

func TestExpiringCertsAreReissued(t *testing.T) {
	cfg := testConfig(t)
	now := time.Now()
	mustEnsure(t, cfg, now)
	certBefore := readFile(t, cfg.Dir, ServingCertName)
	kubeBefore := readFile(t, cfg.Dir, AdminKubeconfigName)

	later := now.Add(340 * 24 * time.Hour) // 25 days before expiry
	b := mustEnsure(t, cfg, later)
	if bytes.Equal(certBefore, readFile(t, cfg.Dir, ServingCertName)) {
		t.Error("serving cert expiring within 30 days was not reissued")
	}
	if bytes.Equal(kubeBefore, readFile(t, cfg.Dir, AdminKubeconfigName)) {
		t.Error("admin kubeconfig with expiring client cert was not rewritten")
	}
	if got := servingCert(t, b).NotAfter; !got.After(later.Add(300 * 24 * time.Hour)) {
		t.Errorf("reissued serving cert expires %s", got)
	}
}

func TestAdminKubeconfig(t *testing.T) {
	cfg := testConfig(t)
	mustEnsure(t, cfg, time.Now())
	kc := loadKubeconfig(t, readFile(t, cfg.Dir, AdminKubeconfigName))
	if kc.CurrentContext != "nodelet" || kc.Contexts["nodelet"].Cluster != "nodelet" {
		t.Fatalf("unexpected contexts: current %q, %v", kc.CurrentContext, kc.Contexts)
	}
	if got := kc.Clusters["nodelet"].Server; got != cfg.APIServerURL {
		t.Errorf("server %q, want %q", got, cfg.APIServerURL)
	}
	cert, err := parseCert(kc.AuthInfos[kc.Contexts["nodelet"].AuthInfo].ClientCertificateData)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "admin" || !slices.Equal(cert.Subject.Organization, []string{"system:masters"}) {
		t.Errorf("admin subject %v", cert.Subject)
	}

	before := readFile(t, cfg.Dir, AdminKubeconfigName)
	cfg.APIServerURL = "https://10.0.0.5:6443"
	mustEnsure(t, cfg, time.Now())
	if bytes.Equal(before, readFile(t, cfg.Dir, AdminKubeconfigName)) {
		t.Fatal("admin kubeconfig not rewritten after the server URL changed")
	}
	kc = loadKubeconfig(t, readFile(t, cfg.Dir, AdminKubeconfigName))
	if got := kc.Clusters["nodelet"].Server; got != cfg.APIServerURL {
		t.Errorf("server %q after change, want %q", got, cfg.APIServerURL)
	}
}

func TestSignClientCert(t *testing.T) {
	b := mustEnsure(t, testConfig(t), time.Now())
	certPEM, keyPEM, err := b.SignClientCert("jane", []string{"dev", "ops"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Fatalf("certificate and key do not pair: %v", err)
	}
	cert, err := parseCert(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cert.Verify(x509.VerifyOptions{
		Roots:     b.CAPool(),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		t.Fatalf("client cert does not verify as ClientAuth: %v", err)
	}
	if cert.Subject.CommonName != "jane" || !slices.Equal(cert.Subject.Organization, []string{"dev", "ops"}) {
		t.Errorf("subject %v", cert.Subject)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: b.CAPool()}); err == nil {
		t.Error("client cert verified for ServerAuth")
	}
	if _, _, err := b.SignClientCert("", nil, time.Hour); err == nil {
		t.Error("empty user accepted")
	}
}

func TestKubeconfig(t *testing.T) {
	cfg := testConfig(t)
	mustEnsure(t, cfg, time.Now())
	b, err := LoadCA(cfg.Dir)
	if err != nil {
		t.Fatalf("LoadCA: %v", err)
	}
	data, err := b.Kubeconfig("https://example.test:6443", "bob", []string{"viewers"})
	if err != nil {
		t.Fatal(err)
	}
	kc := loadKubeconfig(t, data)
	ctx := kc.Contexts[kc.CurrentContext]
	if ctx == nil {
		t.Fatalf("no current context in %s", data)
	}
	cluster, user := kc.Clusters[ctx.Cluster], kc.AuthInfos[ctx.AuthInfo]
	if cluster.Server != "https://example.test:6443" {
		t.Errorf("server %q", cluster.Server)
	}
	if !bytes.Equal(cluster.CertificateAuthorityData, b.CAPEM()) {
		t.Error("CA data not embedded")
	}
	if len(user.ClientCertificateData) == 0 || len(user.ClientKeyData) == 0 {
		t.Error("client certificate or key not embedded")
	}
	if user.ClientCertificate != "" || user.ClientKey != "" || cluster.CertificateAuthority != "" {
		t.Error("kubeconfig refers to files instead of embedding data")
	}
}

// TestServedURL: kubeconfigs default to the URL the control plane last
// started on, which follows --bind-address and --secure-port.
func TestServedURL(t *testing.T) {
	cfg := testConfig(t)
	b, err := LoadCA(cfg.Dir)
	if err == nil {
		if _, err := b.ServedURL(); err == nil {
			t.Error("ServedURL before the first start: no error")
		}
	}
	for _, url := range []string{"https://127.0.0.1:7443", "https://10.240.0.1:6443"} {
		cfg.APIServerURL = url
		b := mustEnsure(t, cfg, time.Now())
		got, err := b.ServedURL()
		if err != nil || got != url {
			t.Errorf("ServedURL after a start on %s = %q, %v", url, got, err)
		}
	}
}

func TestTLSHandshakeWithKubeconfigCert(t *testing.T) {
	b := mustEnsure(t, testConfig(t), time.Now())
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) == 0 {
			fmt.Fprint(w, "anonymous")
			return
		}
		sub := r.TLS.PeerCertificates[0].Subject
		fmt.Fprintf(w, "%s %s %s", r.Proto, sub.CommonName, strings.Join(sub.Organization, ","))
	}))
	srv.TLS = b.TLSConfig()
	// httptest serves its own certificate unless Certificates is set; a
	// real listener has none and calls GetCertificate.
	cur, err := srv.TLS.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	srv.TLS.Certificates = []tls.Certificate{*cur}
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()

	data, err := b.Kubeconfig(srv.URL, "carol", []string{"team-a", "team-b"})
	if err != nil {
		t.Fatal(err)
	}
	client, err := rest.HTTPClientFor(restConfig(loadKubeconfig(t, data)))
	if err != nil {
		t.Fatal(err)
	}
	if got := get(t, client, srv.URL); got != "HTTP/2.0 carol team-a,team-b" {
		t.Errorf("server saw %q", got)
	}

	// Without a client certificate the handshake still succeeds.
	anon := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: b.CAPool()},
	}}
	defer anon.CloseIdleConnections()
	if got := get(t, anon, srv.URL); got != "anonymous" {
		t.Errorf("anonymous request saw %q", got)
	}
}

func get(t *testing.T, client *http.Client, url string) string {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

func TestLoadCA(t *testing.T) {
	dir := t.TempDir()
	_, err := LoadCA(dir)
	if !errors.Is(err, ErrNoCA) {
		t.Fatalf("LoadCA on empty dir: %v, want ErrNoCA", err)
	}
	want := "no CA in " + dir + ": start the control plane once first"
	if err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("LoadCA created files: %v", entries)
	}

	cfg := testConfig(t)
	e := mustEnsure(t, cfg, time.Now())
	l, err := LoadCA(cfg.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if !l.CACert.Equal(e.CACert) {
		t.Error("LoadCA returned a different CA")
	}
}

func TestEnsureRefusesCertWithoutKey(t *testing.T) {
	cfg := testConfig(t)
	mustEnsure(t, cfg, time.Now())
	if err := os.Remove(filepath.Join(cfg.Dir, CAKeyName)); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(cfg); err == nil {
		t.Fatal("Ensure replaced a CA whose key is missing")
	}
}

// TestFrontProxy: the front-proxy CA is its own (not the cluster CA),
// kept across starts, and signs a client certificate for
// front-proxy-client.
func TestFrontProxy(t *testing.T) {
	dir := t.TempDir()
	b, err := Ensure(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	fp, err := b.FrontProxy()
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(fp.Client.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if leaf.Subject.CommonName != FrontProxyUser {
		t.Fatalf("client CN %q", leaf.Subject.CommonName)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(fp.CAPEM)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("client certificate not signed by the front-proxy CA: %v", err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: b.CAPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Fatal("the front-proxy client certificate verifies against the cluster CA")
	}
	again, err := b.FrontProxy()
	if err != nil {
		t.Fatal(err)
	}
	if string(again.CAPEM) != string(fp.CAPEM) {
		t.Fatal("the front-proxy CA changed between starts")
	}
}

// A running control plane renews too: the same bundle, renewed as time
// passes, serves the new certificate from its next handshake, and
// rewrites the admin kubeconfig, with nothing restarted.
func TestRenewWhileRunning(t *testing.T) {
	cfg := testConfig(t)
	now := time.Now()
	b := mustEnsure(t, cfg, now)
	tlsCfg := b.TLSConfig()
	served := func() *x509.Certificate {
		c, err := tlsCfg.GetCertificate(&tls.ClientHelloInfo{})
		if err != nil || c == nil {
			t.Fatalf("GetCertificate: %v", err)
		}
		leaf, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return leaf
	}
	first := served()
	if err := b.renew(now.Add(24 * time.Hour)); err != nil {
		t.Fatal(err)
	}
	if !served().Equal(first) {
		t.Error("a fresh serving certificate was reissued a day later")
	}
	kubeBefore := readFile(t, cfg.Dir, AdminKubeconfigName)
	later := now.Add(340 * 24 * time.Hour)
	if err := b.renew(later); err != nil {
		t.Fatal(err)
	}
	if got := served(); got.Equal(first) || !got.NotAfter.After(later.Add(300*24*time.Hour)) {
		t.Errorf("served certificate after renewal expires %s, want a new one", got.NotAfter)
	}
	if bytes.Equal(kubeBefore, readFile(t, cfg.Dir, AdminKubeconfigName)) {
		t.Error("the admin kubeconfig was not renewed")
	}
}

// In-process credentials live as long as the CA.
func TestInProcessClamped(t *testing.T) {
	b := mustEnsure(t, testConfig(t), time.Now())
	certPEM, _, err := b.SignClientCert("system:kube-scheduler", nil, InProcess)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(certPEM)
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil || !c.NotAfter.Equal(b.CACert.NotAfter) {
		t.Errorf("in-process certificate expires %s, CA %s (%v)", c.NotAfter, b.CACert.NotAfter, err)
	}
}
