// Package apiserver serves the Kubernetes REST API over a storage.Store:
// discovery, CRUD with the status/scale/binding subresources, patch, list
// and watch, tables, and errors as metav1.Status.
package apiserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	pathvalidation "k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/nodelet/nodelet/controlplane/apivalidation"
	"github.com/nodelet/nodelet/controlplane/openapi"
	"github.com/nodelet/nodelet/controlplane/registry"
	"github.com/nodelet/nodelet/controlplane/storage"
)

// DefaultMaxBodyBytes caps request bodies, as upstream's 3 MiB.
const DefaultMaxBodyBytes = 3 << 20

// Config wires a Server.
type Config struct {
	// MaxRequestsInflight and MaxMutatingRequestsInflight bound the
	// read-only and the mutating requests served at once (0: no limit;
	// the control plane passes upstream's 400 and 200). RequestTimeout
	// bounds each request that is not long-running (0: none).
	MaxRequestsInflight         int
	MaxMutatingRequestsInflight int
	RequestTimeout              time.Duration
	// EventTTL is how long Events are kept after they were last recorded
	// (eventttl.go; 0: forever).
	EventTTL time.Duration
	// Audit, when set, writes the audit log (audit.go).
	Audit *Auditor

	// FrontProxy is the client certificate presented to extension API
	// servers (aggregation.go); Endpoints resolves their Services. Both
	// are needed only once a RemoteAPI is set.
	FrontProxy *tls.Certificate
	Endpoints  EndpointResolver

	Store     storage.Store
	Resources []*registry.Resource
	// Address to listen on, e.g. "127.0.0.1:6443". Ignored by Handler.
	Address string
	TLS     *tls.Config
	Authn   authenticator.Request
	Authz   authorizer.Authorizer
	// Tokens, when set, serves serviceaccounts/token (TokenRequest) and
	// the issuer's discovery documents.
	Tokens TokenIssuer
	// Admission are the steps every create and update of a request
	// passes, in order (see admit.go).
	Admission []Admission
	// Validator is upstream's defaulting and validation for what is not a
	// stored kind (TokenRequest): the registry's (registry.AllWith), so
	// the process holds one scheme. Nil: a validator of the server's own.
	Validator *apivalidation.Validator
	// ServiceCIDR is where Service cluster IPs come from (default 10.96.0.0/12).
	ServiceCIDR  string
	MaxBodyBytes int64
	Version      version.Info
	Log          *slog.Logger
	// AdvertiseAddress and AdvertisePort are where in-cluster clients reach
	// this server: the default/kubernetes Service's endpoints. Empty: none.
	AdvertiseAddress string
	AdvertisePort    int
	// ClusterDNSIP is the ClusterIP of the kube-system/kube-dns Service
	// EnsureDefaults creates, so that no other Service takes the address
	// the nodelets serve the cluster DNS on (see ClusterDNSServiceIP).
	// Empty: no kube-dns Service.
	ClusterDNSIP string
	// Ready reports readiness for /readyz beyond the server being up (may be nil).
	Ready func() error
	// Nodes reaches the nodelets for pods/log, exec, attach, portforward
	// and nodes/proxy (see proxy.go); nil answers those with 503.
	Nodes NodeConnector
	// PodTransport dials pods for pods/proxy and services/proxy (see
	// proxy_targets.go); nil: upstream's proxy transport.
	PodTransport http.RoundTripper
	// Metrics provides metrics.k8s.io NodeMetrics and PodMetrics (see
	// metrics.go); nil: the group is not served.
	Metrics MetricsSource
	// RequestMetrics, when set, counts and times requests and serves
	// GET /metrics (see metrics_prom.go); nil: neither.
	RequestMetrics *RequestMetrics
}

// Server is the API server.
type Server struct {
	cfg       Config
	store     storage.Store
	log       *slog.Logger
	table     *resourceTable
	admission *ownAdmission
	watches   *watchCache
	protobuf  runtime.Serializer
	codec     objectCodec
	// validator defaults and validates what is not a stored kind
	// (TokenRequest) with upstream's code.
	validator *apivalidation.Validator
	// podTransport is cfg.PodTransport or the default.
	podTransport http.RoundTripper
	// openAPI is the served OpenAPI v2 and v3 documents.
	openAPI *openapi.Set
	// discovery answers /api and /apis in the aggregated form.
	discovery *aggregatedDiscovery
	// inflight limits the requests served at once.
	inflight *inflight
	// health answers /healthz, /livez and /readyz; shuttingDown closes
	// when Serve's context ends.
	health       http.Handler
	shuttingDown chan struct{}
	// remote is the group-versions extension API servers serve.
	remote remoteAPIs
	// fields keeps managedFields and merges server-side apply, with
	// openAPI's schemas.
	fields *fieldManagers
}

// New validates cfg and builds a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("apiserver: Store is required")
	}
	if cfg.Authn == nil || cfg.Authz == nil {
		return nil, errors.New("apiserver: Authn and Authz are required")
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.ServiceCIDR == "" {
		cfg.ServiceCIDR = "10.96.0.0/12"
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	s := &Server{
		cfg:     cfg,
		store:   cfg.Store,
		log:     cfg.Log.With("component", "apiserver"),
		table:   newResourceTable(cfg.Resources),
		watches: newWatchCache(4096),
	}
	var err error
	if s.protobuf, err = newProtobufSerializer(); err != nil {
		return nil, err
	}
	s.codec = objectCodec{proto: s.protobuf}
	if s.validator = cfg.Validator; s.validator == nil {
		s.validator = apivalidation.New()
	}
	if s.podTransport = cfg.PodTransport; s.podTransport == nil {
		s.podTransport = newPodTransport()
	}
	// The built-in resources' documents, built on first request.
	documented := cfg.Resources
	if cfg.Metrics != nil {
		documented = append(append([]*registry.Resource(nil), documented...), metricsNodes, metricsPods)
	}
	s.discovery = newAggregatedDiscovery(s.serveCoreVersions, s.serveGroups)
	s.shuttingDown = make(chan struct{})
	s.inflight = newInflight(cfg.MaxRequestsInflight, cfg.MaxMutatingRequestsInflight)
	s.health = s.newHealthHandler(cfg.Ready)
	s.openAPI = openapi.NewSet()
	openapi.AddBuiltins(s.openAPI, documented, cfg.Version.GitVersion)
	s.fields = newFieldManagers(s.openAPI, documented)
	alloc, err := newAdmission(s, cfg.ServiceCIDR)
	if err != nil {
		return nil, err
	}
	s.admission = alloc
	return s, nil
}

func (s *Server) lookup(gv schema.GroupVersion, name string) *registry.Resource {
	return s.table.snapshot().lookup(gv, name)
}

// OpenAPI returns the served OpenAPI documents, to which the owner of
// other group-versions (CRDs) adds its own and removes them.
func (s *Server) OpenAPI() *openapi.Set { return s.openAPI }

// Resource returns the served resource for a group and plural name, in its
// storage version (nil if none).
func (s *Server) Resource(group, name string) *registry.Resource {
	return s.table.snapshot().byGR[schema.GroupResource{Group: group, Resource: name}]
}

// Run serves HTTPS on cfg.Address until ctx ends, then shuts down gracefully.
func (s *Server) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Address)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.cfg.Address, err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves HTTPS on ln until ctx ends.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if err := s.EnsureDefaults(ctx); err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{
		Handler:           s.Handler(),
		TLSConfig:         s.cfg.TLS,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	if s.cfg.EventTTL > 0 {
		go s.runEventTTL(ctx, s.cfg.EventTTL)
	}
	errc := make(chan error, 1)
	go func() {
		if s.cfg.TLS == nil {
			errc <- srv.Serve(ln)
			return
		}
		errc <- srv.ServeTLS(ln, "", "")
	}()
	s.log.Info("serving", "address", ln.Addr().String())
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	close(s.shuttingDown)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		srv.Close()
	}
	return nil
}

// Handler returns the HTTP handler: panic recovery, authentication,
// authorization, then routing.
func (s *Server) Handler() http.Handler {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("panic serving request", "method", r.Method, "path", r.URL.Path, "panic", p, "stack", string(debug.Stack()))
				writeError(w, apierrors.NewInternalError(fmt.Errorf("internal error")))
			}
		}()
		s.serve(w, r)
	})
	if s.cfg.RequestMetrics == nil {
		return h
	}
	// Outermost, so the 500 written after a panic is counted too.
	return s.cfg.RequestMetrics.wrap(h)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	if isPublicPath(path) {
		s.servePublic(w, r)
		return
	}
	resp, ok, err := s.cfg.Authn.AuthenticateRequest(r)
	if err != nil || !ok {
		// Like upstream, say only "Unauthorized"; the reason is for the log.
		if err != nil {
			s.log.Debug("authentication failed", "remote", r.RemoteAddr, "err", err)
		}
		if s.cfg.Audit != nil {
			s.auditUnauthenticated(w, r)
		}
		writeError(w, apierrors.NewUnauthorized("Unauthorized"))
		return
	}
	r = r.WithContext(genericrequest.WithUser(r.Context(), resp.User))
	// Impersonation headers (kubectl --as, --as-group) replace the user
	// once the caller is authorized to impersonate (impersonation.go).
	var acting user.Info // the impersonated user, if any
	reqs, err := impersonationRequests(r.Header)
	if err != nil {
		writeError(w, err)
		return
	}
	if len(reqs) > 0 {
		u, err := impersonatedUser(r.Context(), s.cfg.Authz, resp.User, reqs)
		if err != nil {
			writeError(w, err)
			return
		}
		dropImpersonationHeaders(r.Header)
		r = r.WithContext(genericrequest.WithUser(r.Context(), u))
		acting = u
	}
	if s.cfg.Audit != nil {
		var done func()
		w, r, done = s.auditBegin(w, r, resp.User, acting)
		defer done()
	}
	r, release, ok := s.limitRequest(w, r)
	if !ok {
		return
	}
	defer release()
	s.serveAuthorized(w, r)
}

// serveAuthorized authorizes the request's (possibly impersonated) user
// and serves it.
func (s *Server) serveAuthorized(w http.ResponseWriter, r *http.Request) {
	ctx, path := r.Context(), r.URL.Path
	u, ok := genericrequest.UserFrom(ctx)
	if !ok {
		writeError(w, apierrors.NewInternalError(errNoUser))
		return
	}
	attrs, info, isResource := s.requestAttributes(r, u)
	if isResource {
		noteRequest(w, r, info)
	}
	decision, reason, err := s.cfg.Authz.Authorize(ctx, &attrs)
	if decision != authorizer.DecisionAllow {
		if err != nil {
			s.log.Error("authorization failed", "user", u.GetName(), "path", path, "err", err)
			writeError(w, apierrors.NewInternalError(err))
			return
		}
		msg := forbiddenMessage(&attrs)
		if reason != "" {
			msg += ": " + reason
		}
		writeError(w, apierrors.NewForbidden(schema.GroupResource{Group: attrs.APIGroup, Resource: attrs.Resource}, attrs.Name, errors.New(msg)))
		return
	}
	if t := s.remoteFor(path); t != nil {
		s.serveRemote(w, r, t)
		return
	}
	if isResource && s.isMetricsRequest(info) {
		s.serveMetrics(w, r, info)
		return
	}
	if isResource {
		s.serveResource(w, r, info)
		return
	}
	s.serveNonResource(w, r)
}

// requestAttributes are the authorization attributes of r made by u (the
// audit policy matches the same ones).
func (s *Server) requestAttributes(r *http.Request, u user.Info) (authorizer.AttributesRecord, requestInfo, bool) {
	path := r.URL.Path
	info, isResource := parseResourcePath(r.Method, path, r.URL.Query(), s.lookup)
	if !isResource {
		return authorizer.AttributesRecord{User: u, Path: path, Verb: strings.ToLower(r.Method)}, info, false
	}
	attrs := authorizer.AttributesRecord{User: u, ResourceRequest: true, Verb: info.Verb, APIGroup: info.GV.Group,
		APIVersion: info.GV.Version, Resource: info.ResourceArg, Subresource: info.Subresource,
		Namespace: info.Namespace, Name: info.Name, Path: path}
	// A namespace is in itself, as upstream's RequestInfoFactory has it: a
	// RoleBinding in team may grant access to namespace team.
	if attrs.APIGroup == "" && attrs.Resource == "namespaces" && attrs.Name != "" {
		attrs.Namespace = attrs.Name
	}
	selectorAttributes(&attrs, r.URL.Query())
	return attrs, info, true
}

// selectorAttributes records a collection request's field and label
// selectors, parsed, as upstream's authorization filter does: the Node
// authorizer lets a node list and watch only pods whose spec.nodeName
// selector names it. A metadata.name selector names the object.
func selectorAttributes(attrs *authorizer.AttributesRecord, q url.Values) {
	if attrs.Verb != "list" && attrs.Verb != "watch" && attrs.Verb != "deletecollection" {
		return
	}
	if fs := q.Get("fieldSelector"); fs != "" {
		sel, err := fields.ParseSelector(fs)
		if err != nil {
			attrs.FieldSelectorParsingErr = err
		} else if reqs := sel.Requirements(); len(reqs) > 0 {
			attrs.FieldSelectorRequirements = reqs
			// A list or watch of one object by name is about that name,
			// as upstream's RequestInfoFactory reads it: resourceNames
			// rules and the Node authorizer then apply.
			if name, ok := sel.RequiresExactMatch("metadata.name"); ok && attrs.Name == "" && attrs.Verb != "deletecollection" &&
				len(pathvalidation.IsValidPathSegmentName(name)) == 0 {
				attrs.Name = name
			}
		}
	}
	if ls := q.Get("labelSelector"); ls != "" {
		sel, err := labels.Parse(ls)
		if err != nil {
			attrs.LabelSelectorParsingErr = err
		} else if reqs, _ := sel.Requirements(); len(reqs) > 0 {
			attrs.LabelSelectorRequirements = reqs
		}
	}
}

func isPublicPath(p string) bool {
	switch p {
	case "/healthz", "/livez", "/readyz", "/version":
		return true
	}
	return strings.HasPrefix(p, "/healthz/") || strings.HasPrefix(p, "/livez/") || strings.HasPrefix(p, "/readyz/")
}

func (s *Server) servePublic(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/version":
		writeJSON(w, http.StatusOK, s.cfg.Version)
	default:
		s.health.ServeHTTP(w, r)
	}
}

func (s *Server) serveNonResource(w http.ResponseWriter, r *http.Request) {
	p := strings.TrimSuffix(r.URL.Path, "/")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeError(w, apierrors.NewMethodNotSupported(schema.GroupResource{}, r.Method))
		return
	}
	switch {
	case p == "/api":
		s.serveDiscoveryCore(w, r)
	case p == "/apis":
		s.serveDiscoveryGroups(w, r)
	case strings.HasPrefix(p, "/apis/") && strings.Count(p, "/") == 2:
		s.serveGroup(w, r, strings.TrimPrefix(p, "/apis/"))
	case p == "/api/v1" || (strings.HasPrefix(p, "/apis/") && strings.Count(p, "/") == 3):
		s.serveResourceList(w, r, p)
	case p == "/metrics" && s.cfg.RequestMetrics != nil:
		s.cfg.RequestMetrics.handler.ServeHTTP(w, r)
	case p == openapi.V2Path || p == openapi.V3Path || strings.HasPrefix(p, openapi.V3Path+"/"):
		s.openAPI.ServeHTTP(w, r)
	case p == openIDConfigPath && s.cfg.Tokens != nil:
		writeRawJSON(w, s.cfg.Tokens.OpenIDConfiguration())
	case p == jwksPath && s.cfg.Tokens != nil:
		w.Header().Set("Content-Type", "application/jwk-set+json")
		w.WriteHeader(http.StatusOK)
		w.Write(s.cfg.Tokens.JWKS())
	default:
		writeError(w, apierrors.NewNotFound(schema.GroupResource{}, ""))
	}
}
