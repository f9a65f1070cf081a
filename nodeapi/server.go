// Package nodeapi is the nodelet's own HTTPS API, with upstream kubelet's
// paths and parameters: /healthz, /pods, /containerLogs, /exec, /attach,
// /portForward, /run, /stats/summary, /metrics/resource, /metrics (the
// nodelet's own Prometheus metrics, package kubeletmetrics) and
// /metrics/probes (the probe metrics alone, as upstream). The API
// server proxies kubectl logs, exec, attach, cp and port-forward to it,
// and reads the node's resource usage from it for kubectl top.
//
// Every request, /healthz included, is authenticated and authorized as
// upstream's kubelet does on its secure port (auth.go): a client
// certificate of the cluster CA or, with webhook authentication, a bearer
// token the API server accepts (TokenReview), 401 otherwise; then the
// authorizer (with Webhook authorization the API server's
// SubjectAccessReview on nodes/stats, metrics, log, pods, healthz,
// configz or proxy of this node) decides, 403 otherwise. The agent's
// authenticator and authorizer are built as upstream's kubelet builds
// them, on k8s.io/apiserver's authenticators (delegated.go).
package nodeapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/runtime"
)

// DefaultPort is the kubelet's port, which the nodelet keeps.
const DefaultPort = 10250

// Stream timeouts, as upstream's defaults (--streaming-connection-idle-timeout).
const (
	DefaultStreamIdleTimeout     = 4 * time.Hour
	DefaultStreamCreationTimeout = 30 * time.Second
)

// Runtime is what the API needs of the container runtime.
type Runtime interface {
	PodStatus(ctx context.Context, uid types.UID) (*runtime.PodStatus, error)
	Exec(ctx context.Context, id string, cmd []string, stdin io.Reader, stdout, stderr io.WriteCloser, tty bool, resize <-chan runtime.TerminalSize) error
	ExecSync(ctx context.Context, id string, cmd []string) (output []byte, exitCode int, err error)
	PortForward(ctx context.Context, podUID types.UID, port int32, stream io.ReadWriteCloser) error
	// Attach connects to an interactive (stdin or tty) container's live
	// streams; runtime.ErrNotAttachable for any other container.
	Attach(ctx context.Context, id string, stdin io.Reader, stdout, stderr io.Writer, resize <-chan runtime.TerminalSize) error
}

// Stats is the node's resource usage (see package stats).
type Stats interface {
	Summary() *statsv1alpha1.Summary
	ResourceMetricsHandler() http.Handler
}

// Config configures New.
type Config struct {
	// Address to listen on, e.g. "0.0.0.0:10250".
	Address string
	// Certificate is the serving certificate (for the node's names and
	// addresses, signed by the cluster CA). GetCertificate, when set,
	// gives it at each handshake instead (one the control plane issued and
	// renews, see nodecerts.Serving); its error fails the handshake.
	Certificate    tls.Certificate
	GetCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// ClientCAs verify callers' client certificates.
	ClientCAs *x509.CertPool
	// NodeName is the node's name, the nodes object requests are
	// authorized on.
	NodeName string
	// Authenticator identifies callers (the agent's: Delegated); default:
	// client certificates of ClientCAs only.
	Authenticator authenticator.Request
	// Authorizer decides whether a caller may (the agent's: Delegated);
	// default: AllowedUsers and the members of AllowedGroups may do
	// anything (default: the control plane's kube-apiserver-kubelet-client
	// and system:masters), nobody else anything.
	Authorizer                  authorizer.UnconditionalAuthorizer
	AllowedUsers, AllowedGroups []string
	// Pods returns the pods bound to this node (the informer's copies).
	Pods    func() []*corev1.Pod
	Runtime Runtime
	Stats   Stats
	// Metrics and ProbeMetrics, optional, serve GET /metrics (the
	// nodelet's Prometheus metrics) and GET /metrics/probes (the probe
	// metrics, where upstream's kubelet serves them); nil answers 503.
	Metrics, ProbeMetrics http.Handler
	// LogRoot is where the CRI logs are (runtime.ContainerLogPath).
	LogRoot                                  string
	StreamIdleTimeout, StreamCreationTimeout time.Duration
	Log                                      *slog.Logger
}

// APIServerUser is the identity the control plane presents to nodelets
// (controlplane/nodeclient.APIServerUser; node packages do not import the
// control plane).
const APIServerUser = "kube-apiserver-kubelet-client"

// Server is the nodelet's HTTPS API.
type Server struct {
	cfg Config
	log *slog.Logger
	mux *http.ServeMux
}

// New checks cfg and builds the routes.
func New(cfg Config) (*Server, error) {
	if cfg.ClientCAs == nil || cfg.Pods == nil || cfg.Runtime == nil {
		return nil, errors.New("nodeapi: ClientCAs, Pods and Runtime are required")
	}
	if cfg.Authenticator == nil {
		cfg.Authenticator = certificateAuthenticator(cfg.ClientCAs)
	}
	if cfg.Authorizer == nil {
		if len(cfg.AllowedUsers) == 0 && len(cfg.AllowedGroups) == 0 {
			cfg.AllowedUsers, cfg.AllowedGroups = []string{APIServerUser}, []string{"system:masters"}
		}
		cfg.Authorizer = allowListAuthorizer(cfg.AllowedUsers, cfg.AllowedGroups)
	}
	if cfg.StreamIdleTimeout <= 0 {
		cfg.StreamIdleTimeout = DefaultStreamIdleTimeout
	}
	if cfg.StreamCreationTimeout <= 0 {
		cfg.StreamCreationTimeout = DefaultStreamCreationTimeout
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	s := &Server{cfg: cfg, log: cfg.Log.With("component", "nodeapi"), mux: http.NewServeMux()}
	s.routes()
	return s, nil
}

func (s *Server) routes() {
	s.handle("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	s.handle("GET /pods", s.servePods)
	s.handle("GET /containerLogs/{namespace}/{pod}/{container}", s.serveLogs)
	for _, m := range []string{"GET", "POST"} {
		s.handle(m+" /exec/{namespace}/{pod}/{container}", s.serveExec)
		s.handle(m+" /attach/{namespace}/{pod}/{container}", s.serveAttach)
		s.handle(m+" /portForward/{namespace}/{pod}", s.servePortForward)
	}
	s.handle("POST /run/{namespace}/{pod}/{container}", s.serveRun)
	s.handle("GET /stats/summary", s.serveSummary)
	s.handle("GET /metrics/resource", s.serveResourceMetrics)
	s.handle("GET /metrics", serveMetrics(s.cfg.Metrics))
	s.handle("GET /metrics/probes", serveMetrics(s.cfg.ProbeMetrics))
	// Upstream kubelet's profiling handler (enableProfilingHandler, on by
	// default), authorized as nodes/proxy like every other path.
	s.handle("GET /debug/pprof/", pprof.Index)
	s.handle("GET /debug/pprof/cmdline", pprof.Cmdline)
	s.handle("GET /debug/pprof/profile", pprof.Profile)
	s.handle("GET /debug/pprof/symbol", pprof.Symbol)
	s.handle("GET /debug/pprof/trace", pprof.Trace)
}

// handle registers h behind authentication and authorization.
func (s *Server) handle(pattern string, h http.HandlerFunc) {
	s.mux.Handle(pattern, s.authorize(h))
}

// Handler is the API with its authentication, for tests and Run.
func (s *Server) Handler() http.Handler { return s.mux }

// TLSConfig asks for client certificates and verifies them against
// ClientCAs; a request without one is left to the other authenticators
// (bearer tokens, anonymous), 401 if none knows the caller.
func (s *Server) TLSConfig() *tls.Config {
	c := &tls.Config{
		ClientAuth: tls.VerifyClientCertIfGiven,
		ClientCAs:  s.cfg.ClientCAs,
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"}, // SPDY and WebSocket upgrades need HTTP/1.1
	}
	if s.cfg.GetCertificate != nil {
		c.GetCertificate = s.cfg.GetCertificate
	} else {
		c.Certificates = []tls.Certificate{s.cfg.Certificate}
	}
	return c
}

// Run serves HTTPS on cfg.Address until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Address)
	if err != nil {
		return fmt.Errorf("nodeapi: listen on %s: %w", s.cfg.Address, err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves HTTPS on ln until ctx ends; streams still open then are cut.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	// Upstream kubelet's server timeouts: a request (a log followed, an
	// exec before it is hijacked) may last four hours, an idle connection
	// 90 s, headers 1 MiB.
	srv := &http.Server{
		Handler:           s.mux,
		TLSConfig:         s.TLSConfig(),
		ReadHeaderTimeout: 30 * time.Second,
		ReadTimeout:       4 * time.Hour,
		WriteTimeout:      4 * time.Hour,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(tls.NewListener(ln, srv.TLSConfig)) }()
	s.log.Info("serving", "address", ln.Addr().String())
	select {
	case err := <-errc:
		return fmt.Errorf("nodeapi: serve: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		srv.Close()
	}
	return nil
}
