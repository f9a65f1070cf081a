package apiserver

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodelet/nodelet/controlplane/pki"
	"github.com/nodelet/nodelet/controlplane/registry"
	"github.com/nodelet/nodelet/controlplane/storage"
	"github.com/nodelet/nodelet/controlplane/storage/bolt"
)

// testEnv is an in-process API server on real bbolt and real TLS.
type testEnv struct {
	srv    *Server
	bundle *pki.Bundle
	store  *bolt.Store
	ts     *httptest.Server
	config *rest.Config
}

func newTestEnv(tb testing.TB, hub storage.HubOptions, wrap func(http.Handler) http.Handler) *testEnv {
	tb.Helper()
	return newTestEnvWith(tb, hub, wrap, nil)
}

// newTestEnvWith is newTestEnv with configure, when set, changing the
// server's Config before New.
func newTestEnvWith(tb testing.TB, hub storage.HubOptions, wrap func(http.Handler) http.Handler, configure func(*Config)) *testEnv {
	tb.Helper()
	dir := tb.TempDir()
	bundle, err := pki.Ensure(pki.Config{Dir: dir})
	if err != nil {
		tb.Fatal(err)
	}
	store, err := bolt.Open(bolt.Config{Path: filepath.Join(dir, "state.db"), Hub: hub})
	if err != nil {
		tb.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg := Config{Store: store, Resources: registry.All(),
		Authn: testAuthn(), Authz: AllowAuthenticated, Log: log}
	if configure != nil {
		configure(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.EnsureDefaults(ctx); err != nil {
		tb.Fatal(err)
	}
	var h http.Handler = srv.Handler()
	if wrap != nil {
		h = wrap(h)
	}
	ts := httptest.NewUnstartedServer(h)
	ts.TLS = testTLS(tb, bundle)
	ts.EnableHTTP2 = true
	ts.StartTLS()
	certPEM, keyPEM, err := bundle.SignClientCert("admin", []string{"system:masters"}, time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	env := &testEnv{srv: srv, bundle: bundle, store: store, ts: ts, config: &rest.Config{
		Host: ts.URL, QPS: -1,
		TLSClientConfig: rest.TLSClientConfig{CAData: bundle.CAPEM(), CertData: certPEM, KeyData: keyPEM},
	}}
	tb.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
		store.Close()
	})
	return env
}

func (e *testEnv) clientset(tb testing.TB) *kubernetes.Clientset {
	cs, err := kubernetes.NewForConfig(e.config)
	if err != nil {
		tb.Fatal(err)
	}
	return cs
}

func newClientset(tb testing.TB, cfg *rest.Config) *kubernetes.Clientset {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return cs
}

// testAuthn is the control plane's authentication chain without a token
// file: client certificates, every user in system:authenticated.
func testAuthn() authenticator.Request {
	a, err := NewAuthenticator(AuthnOptions{})
	if err != nil {
		panic(err)
	}
	return a
}

// testTLS is bundle's serving configuration for an httptest server, which
// serves its own certificate unless Certificates is set (a real listener
// calls GetCertificate).
func testTLS(tb testing.TB, bundle *pki.Bundle) *tls.Config {
	tb.Helper()
	cfg := bundle.TLSConfig()
	cur, err := cfg.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil {
		tb.Fatal(err)
	}
	cfg.Certificates = []tls.Certificate{*cur}
	return cfg
}
