package apiserver

// The aggregation layer's request path: a group-version registered by an
// APIService that names a Service is served by an extension API server
// behind that Service. Requests for it are authenticated and authorized
// here, then proxied to one of the Service's ready endpoints with the
// caller's identity in the front-proxy headers (X-Remote-User,
// X-Remote-Group, X-Remote-Extra-*) and this server's front-proxy client
// certificate, as kube-apiserver's aggregator does with
// --enable-aggregator-routing (endpoints, not the cluster IP: the control
// plane host routes to pods, not necessarily to Services). The
// controlplane/aggregator component keeps the set current.

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	utilproxy "k8s.io/apimachinery/pkg/util/proxy"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/transport"
)

// EndpointResolver finds a ready endpoint of a Service's port.
type EndpointResolver interface {
	ResolveEndpoint(namespace, name string, port int32) (*url.URL, error)
}

// RemoteAPI is one group-version served by an extension API server.
type RemoteAPI struct {
	GroupVersion         schema.GroupVersion
	GroupPriorityMinimum int32
	VersionPriority      int32
	// Service, Namespace and Port name the extension server's Service.
	Namespace, Service string
	Port               int32
	// CABundle verifies the extension server's serving certificate (for
	// the name SERVICE.NAMESPACE.svc), unless InsecureSkipTLSVerify.
	CABundle              []byte
	InsecureSkipTLSVerify bool
	// Available is the APIService's Available condition: requests for an
	// unavailable group-version get 503.
	Available bool
	// Resources is the extension server's resource list for the
	// group-version, listed in discovery; nil until it is known.
	Resources *metav1.APIResourceList
}

// remoteAPIs is the current set, replaced as a whole on every change.
type remoteAPIs struct {
	mu  sync.Mutex // serializes changes
	cur atomic.Pointer[map[schema.GroupVersion]*remoteTarget]
	// changes counts changes, for discovery to notice them.
	changes atomic.Int64
}

// remoteTarget is a RemoteAPI with its transport.
type remoteTarget struct {
	api       RemoteAPI
	transport http.RoundTripper
}

func (r *remoteAPIs) get(gv schema.GroupVersion) *remoteTarget {
	if m := r.cur.Load(); m != nil {
		return (*m)[gv]
	}
	return nil
}

func (r *remoteAPIs) all() map[schema.GroupVersion]*remoteTarget {
	if m := r.cur.Load(); m != nil {
		return *m
	}
	return nil
}

// SetRemoteAPI serves api's group-version through its extension server,
// replacing what was set for it before; nil api stops proxying gv.
func (s *Server) SetRemoteAPI(gv schema.GroupVersion, api *RemoteAPI) error {
	var target *remoteTarget
	if api != nil {
		rt, err := NewRemoteTransport(s.cfg.FrontProxy, api)
		if err != nil {
			return fmt.Errorf("proxy to %s/%s for %s: %w", api.Namespace, api.Service, gv, err)
		}
		target = &remoteTarget{api: *api, transport: rt}
	}
	r := &s.remote
	r.mu.Lock()
	defer r.mu.Unlock()
	next := map[schema.GroupVersion]*remoteTarget{}
	for k, v := range r.all() {
		next[k] = v
	}
	if target == nil {
		delete(next, gv)
	} else {
		next[gv] = target
	}
	r.cur.Store(&next)
	r.changes.Add(1)
	return nil
}

// NewRemoteTransport is the TLS transport to api's server: the
// front-proxy client certificate, the APIService's CA bundle and server
// name (SERVICE.NAMESPACE.svc).
func NewRemoteTransport(frontProxy *tls.Certificate, api *RemoteAPI) (http.RoundTripper, error) {
	if frontProxy == nil {
		return nil, fmt.Errorf("no front-proxy client certificate configured")
	}
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{*frontProxy},
		ServerName:   api.Service + "." + api.Namespace + ".svc",
		// http/1.1 only: watches and upgrades pass through unchanged.
		NextProtos: []string{"http/1.1"},
	}
	if api.InsecureSkipTLSVerify {
		cfg.InsecureSkipVerify = true
	} else {
		pool := x509.NewCertPool()
		if len(api.CABundle) > 0 && !pool.AppendCertsFromPEM(api.CABundle) {
			return nil, fmt.Errorf("caBundle holds no PEM certificate")
		}
		cfg.RootCAs = pool
	}
	return utilnet.SetTransportDefaults(&http.Transport{TLSClientConfig: cfg}), nil
}

// remoteFor returns the remote group-version a path is under
// (/apis/GROUP/VERSION and below), or nil.
func (s *Server) remoteFor(path string) *remoteTarget {
	if !strings.HasPrefix(path, "/apis/") {
		return nil
	}
	parts := strings.SplitN(strings.TrimPrefix(path, "/apis/"), "/", 3)
	if len(parts) < 2 || parts[1] == "" {
		return nil
	}
	return s.remote.get(schema.GroupVersion{Group: parts[0], Version: parts[1]})
}

// serveRemote proxies an authorized request to the extension server.
func (s *Server) serveRemote(w http.ResponseWriter, r *http.Request, t *remoteTarget) {
	if !t.api.Available {
		writeError(w, apierrors.NewServiceUnavailable(fmt.Sprintf("the server is currently unable to handle the request (%s is not available)", t.api.GroupVersion)))
		return
	}
	u, ok := genericrequest.UserFrom(r.Context())
	if !ok {
		writeError(w, apierrors.NewInternalError(errNoUser))
		return
	}
	loc, err := s.cfg.Endpoints.ResolveEndpoint(t.api.Namespace, t.api.Service, t.api.Port)
	if err != nil {
		writeError(w, apierrors.NewServiceUnavailable(err.Error()))
		return
	}
	loc.Path, loc.RawQuery = r.URL.Path, r.URL.RawQuery
	// The caller's credentials are for us; who the caller is travels in
	// the front-proxy headers, set on the request itself so that upgrade
	// requests (dialled directly, not through the transport) carry them.
	r.Header.Del("Authorization")
	for name := range r.Header {
		if strings.HasPrefix(name, "Impersonate-") || strings.HasPrefix(name, "X-Remote-") {
			r.Header.Del(name)
		}
	}
	transport.SetAuthProxyHeaders(r, u.GetName(), u.GetUID(), u.GetGroups(), u.GetExtra())
	h := utilproxy.NewUpgradeAwareHandler(loc, t.transport, true, false, proxyResponder{s, "extension API server"})
	h.UseLocationHost = true
	h.ServeHTTP(w, r)
}
