// Package controlplanetest starts a real, in-process API server (real
// bbolt in a temporary directory, real TLS, client-certificate auth) for
// tests of components that talk to the API: controllers, the scheduler,
// the nodelet. Objects in it are real API objects; nodes are just objects.
package controlplanetest

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/kubernetes/pkg/capabilities"

	"github.com/nodelet/nodelet/controlplane/apiserver"
	"github.com/nodelet/nodelet/controlplane/pki"
	"github.com/nodelet/nodelet/controlplane/registry"
	"github.com/nodelet/nodelet/controlplane/storage"
	"github.com/nodelet/nodelet/controlplane/storage/bolt"
)

// Options tunes a test server. The zero value is fine.
type Options struct {
	Hub storage.HubOptions
	// Wrap, if set, wraps the HTTP handler (to inject faults or count requests).
	Wrap func(http.Handler) http.Handler
	// LogLevel for the server's log (default: warn).
	LogLevel slog.Level
	// Metrics, if set, serves metrics.k8s.io (nodemetrics in a real
	// control plane; a fake in tests of the autoscaler).
	Metrics apiserver.MetricsSource
	// Admission, if set, builds the admission chain from a loopback admin
	// config (the chain's informers and client talk to this server; they
	// are used only once it serves).
	Admission func(tb testing.TB, loopback *rest.Config) []apiserver.Admission
	// Authz, if set, builds the authorizer from a loopback admin config
	// (default: apiserver.AllowAuthenticated).
	Authz func(tb testing.TB, loopback *rest.Config) authorizer.Authorizer
}

// Server is a running test API server.
type Server struct {
	API    *apiserver.Server
	Store  *bolt.Store
	HTTP   *httptest.Server
	Bundle *pki.Bundle
	// Config is an admin client config (group system:masters) with no
	// client-side rate limit.
	Config *rest.Config
}

// Start starts a server that is stopped when the test ends.
func Start(tb testing.TB, opts Options) *Server {
	tb.Helper()
	// The control plane's default --allow-privileged (process-wide, as
	// upstream keeps it).
	capabilities.Setup(true, 0)
	dir := tb.TempDir()
	bundle, err := pki.Ensure(pki.Config{Dir: dir})
	if err != nil {
		tb.Fatal(err)
	}
	store, err := bolt.Open(bolt.Config{Path: filepath.Join(dir, "state.db"), Hub: opts.Hub})
	if err != nil {
		tb.Fatal(err)
	}
	level := opts.LogLevel
	if level == 0 {
		level = slog.LevelWarn
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	authn, err := apiserver.NewAuthenticator(apiserver.AuthnOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	// The listener comes first, so that its URL is known to the admission
	// chain's loopback client; requests wait for the handler.
	var handler http.Handler
	built := make(chan struct{})
	release := sync.OnceFunc(func() { close(built) })
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-built
		if handler == nil { // the test failed before the server was built
			http.Error(w, "no server", http.StatusServiceUnavailable)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	ts.TLS = bundle.TLSConfig()
	// httptest serves its own certificate unless Certificates is set (a
	// real listener calls GetCertificate).
	if cur, err := ts.TLS.GetCertificate(&tls.ClientHelloInfo{}); err == nil && cur != nil {
		ts.TLS.Certificates = []tls.Certificate{*cur}
	}
	ts.EnableHTTP2 = true
	ts.StartTLS()
	s := &Server{Store: store, HTTP: ts, Bundle: bundle}
	s.Config = s.UserConfig(tb, "admin", "system:masters")
	tb.Cleanup(func() {
		release()
		ts.CloseClientConnections()
		ts.Close()
		store.Close()
	})
	var admit []apiserver.Admission
	if opts.Admission != nil {
		admit = opts.Admission(tb, s.UserConfig(tb, "system:apiserver", "system:masters"))
	}
	authz := apiserver.AllowAuthenticated
	if opts.Authz != nil {
		authz = opts.Authz(tb, s.UserConfig(tb, "system:apiserver", "system:masters"))
	}
	api, err := apiserver.New(apiserver.Config{Store: store, Resources: registry.All(),
		Authn: authn, Authz: authz, Log: log,
		Metrics: opts.Metrics, Admission: admit})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := api.EnsureDefaults(ctx); err != nil {
		tb.Fatal(err)
	}
	s.API = api
	handler = api.Handler()
	if opts.Wrap != nil {
		handler = opts.Wrap(handler)
	}
	release()
	return s
}

// UserConfig returns a client config for user in groups, on a transport of
// its own (not shared with other configs).
func (s *Server) UserConfig(tb testing.TB, user string, groups ...string) *rest.Config {
	tb.Helper()
	certPEM, keyPEM, err := s.Bundle.SignClientCert(user, groups, time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	return &rest.Config{
		Host: s.HTTP.URL, QPS: -1,
		TLSClientConfig: rest.TLSClientConfig{CAData: s.Bundle.CAPEM(), CertData: certPEM, KeyData: keyPEM},
		Dial:            (&net.Dialer{}).DialContext,
	}
}

// Clientset returns a typed client for the admin config.
func (s *Server) Clientset(tb testing.TB) *kubernetes.Clientset {
	tb.Helper()
	cs, err := kubernetes.NewForConfig(s.Config)
	if err != nil {
		tb.Fatal(err)
	}
	return cs
}
