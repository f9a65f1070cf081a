package nodecerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/keyutil"
)

// clientPairFor is a client certificate of ca for subject CN=cn.
func clientPairFor(t *testing.T, ca *testCA, cn string) *tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.CertificateRequest{Subject: nodeSubject(cn)}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := ca.issue(t, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	keyPEM, _ := keyutil.MarshalPrivateKeyToPEM(key)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &pair
}

// The API client presents the current certificate at each handshake; a
// kept-alive connection goes on with the old one until the dialer closes
// it, which is why rotation closes them.
func TestDynamicClientConfigFollowsTheCurrentCertificate(t *testing.T) {
	ca := newTestCA(t)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) == 0 {
			http.Error(w, "no certificate", http.StatusUnauthorized)
			return
		}
		io.WriteString(w, r.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	srv.StartTLS()
	defer srv.Close()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

	var current atomic.Pointer[tls.Certificate]
	current.Store(clientPairFor(t, ca, "a"))
	rc := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: caPEM, CertData: []byte("ignored"), KeyData: []byte("ignored")}}
	dyn, dialer, err := dynamicClientConfig(rc, current.Load)
	if err != nil {
		t.Fatal(err)
	}
	if len(dyn.CAData) != 0 || len(dyn.CertData) != 0 || dyn.Transport == nil {
		t.Fatalf("the TLS settings stayed beside the transport: %+v", dyn.TLSClientConfig)
	}
	client := &http.Client{Transport: dyn.Transport}
	get := func() string {
		t.Helper()
		resp, err := client.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if got := get(); got != "system:node:a" {
		t.Fatalf("first request as %q", got)
	}
	current.Store(clientPairFor(t, ca, "b"))
	if got := get(); got != "system:node:a" {
		t.Logf("a kept-alive connection handshook again (%q)", got)
	}
	dialer.CloseAll()
	if got := get(); got != "system:node:b" {
		t.Errorf("after the rotation the request went as %q", got)
	}
	current.Store(nil)
	dialer.CloseAll()
	if got := get(); got != "no certificate\n" {
		t.Errorf("without a certificate: %q", got)
	}
}
