package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// recordedRequest is one request a client sent through a recordingProxy
// and the status the API server answered it with.
type recordedRequest struct {
	Method, URL, Accept, ContentType string
	Code                             int
}

func (r recordedRequest) String() string {
	return fmt.Sprintf("%d %s %s (Accept: %s; Content-Type: %s)", r.Code, r.Method, r.URL, r.Accept, r.ContentType)
}

// recordingProxy is an HTTPS reverse proxy on loopback in front of a
// cluster's API server, authenticated to it as the cluster's admin, that
// records every request passing through it: how a client (Helm) talks to
// the API server, to compare one API server's answers with another's.
type recordingProxy struct {
	kubeconfig string // a kubeconfig of the proxy (its certificate is not verified)
	mu         sync.Mutex
	requests   []recordedRequest
}

// startRecordingProxy starts a recordingProxy in front of cp until the
// test ends.
func startRecordingProxy(t testing.TB, cp *controlPlane) *recordingProxy {
	t.Helper()
	cfg := cp.restConfig()
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = transport
	rp.FlushInterval = -1 // watches stream
	p := &recordingProxy{}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		rp.ServeHTTP(rec, r)
		p.mu.Lock()
		defer p.mu.Unlock()
		p.requests = append(p.requests, recordedRequest{Method: r.Method, URL: r.URL.RequestURI(),
			Accept: r.Header.Get("Accept"), ContentType: r.Header.Get("Content-Type"), Code: rec.code})
	}))
	t.Cleanup(srv.Close)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["proxy"] = &clientcmdapi.Cluster{Server: srv.URL, InsecureSkipTLSVerify: true}
	kc.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	kc.CurrentContext = "proxy"
	p.kubeconfig = filepath.Join(t.TempDir(), "proxy.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, p.kubeconfig); err != nil {
		t.Fatal(err)
	}
	return p
}

// take returns the requests recorded since the last take.
func (p *recordingProxy) take() []recordedRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.requests
	p.requests = nil
	return r
}

// statusRecorder keeps the status code written through it.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
