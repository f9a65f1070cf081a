package apiserver

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/nodelet/nodelet/controlplane/registry"
	"github.com/nodelet/nodelet/controlplane/storage/bolt"
)

// userHeader authenticates requests carrying X-Test-User.
type userHeader struct{}

func (userHeader) AuthenticateRequest(r *http.Request) (*authenticator.Response, bool, error) {
	if n := r.Header.Get("X-Test-User"); n != "" {
		return &authenticator.Response{User: &user.DefaultInfo{Name: n, Groups: []string{"system:masters"}}}, true, nil
	}
	return nil, false, nil
}

func newMetricsServer(t *testing.T) (http.Handler, *RequestMetrics, *prometheus.Registry) {
	t.Helper()
	store, err := bolt.Open(bolt.Config{Path: filepath.Join(t.TempDir(), "state.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	reg := prometheus.NewRegistry()
	m, err := NewRequestMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Store: store, Resources: registry.All(),
		Authn: userHeader{}, Authz: AllowAuthenticated, RequestMetrics: m})
	if err != nil {
		t.Fatal(err)
	}
	return srv.Handler(), m, reg
}

func do(h http.Handler, method, path, user string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, nil)
	if user != "" {
		r.Header.Set("X-Test-User", user)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestRequestMetricsCountCodes(t *testing.T) {
	h, m, reg := newMetricsServer(t)
	if w := do(h, "GET", "/api/v1/namespaces/default/pods/missing", "admin"); w.Code != http.StatusNotFound {
		t.Fatalf("GET missing pod: %d", w.Code)
	}
	do(h, "GET", "/api/v1/namespaces/default/pods/missing", "admin")
	if w := do(h, "GET", "/apis/apps/v1/deployments", "admin"); w.Code != http.StatusOK {
		t.Fatalf("LIST deployments: %d %s", w.Code, w.Body)
	}
	if w := do(h, "GET", "/api/v1/nodes", ""); w.Code != http.StatusUnauthorized {
		t.Fatalf("anonymous list: %d", w.Code)
	}
	for _, c := range []struct {
		labels []string
		want   float64
	}{
		{[]string{"GET", "", "v1", "pods", "", "resource", "apiserver", "404"}, 2},
		{[]string{"LIST", "apps", "v1", "deployments", "", "cluster", "apiserver", "200"}, 1},
		{[]string{"GET", "", "", "", "", "", "apiserver", "401"}, 1},
	} {
		if got := testutil.ToFloat64(m.total.WithLabelValues(c.labels...)); got != c.want {
			t.Errorf("apiserver_request_total%v = %v, want %v", c.labels, got, c.want)
		}
	}
	if n := testutil.CollectAndCount(reg, "apiserver_request_duration_seconds"); n != 3 {
		t.Errorf("%d duration series, want 3", n)
	}

	// /metrics needs authentication, then serves the registry.
	if w := do(h, "GET", "/metrics", ""); w.Code != http.StatusUnauthorized {
		t.Fatalf("anonymous /metrics: %d", w.Code)
	}
	w := do(h, "GET", "/metrics", "admin")
	if w.Code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", w.Code, w.Body)
	}
	want := `apiserver_request_total{code="404",component="apiserver",group="",resource="pods",scope="resource",subresource="",verb="GET",version="v1"} 2`
	if !strings.Contains(w.Body.String(), want) {
		t.Errorf("/metrics lacks %s:\n%s", want, w.Body)
	}
}

func TestMetricVerb(t *testing.T) {
	apply := httptest.NewRequest("PATCH", "/", nil)
	apply.Header.Set("Content-Type", "application/apply-patch+yaml")
	for _, c := range []struct {
		r    *http.Request
		info requestInfo
		want string
	}{
		{httptest.NewRequest("POST", "/", nil), requestInfo{Verb: "create"}, "POST"},
		{httptest.NewRequest("GET", "/", nil), requestInfo{Verb: "watch"}, "WATCH"},
		{httptest.NewRequest("PATCH", "/", nil), requestInfo{Verb: "patch"}, "PATCH"},
		{apply, requestInfo{Verb: "patch"}, "APPLY"},
		{httptest.NewRequest("POST", "/", nil), requestInfo{Verb: "create", Subresource: "exec"}, "CONNECT"},
		{httptest.NewRequest("DELETE", "/", nil), requestInfo{Verb: "deletecollection"}, "DELETECOLLECTION"},
	} {
		if got := metricVerb(c.r, c.info); got != c.want {
			t.Errorf("%s %+v: %s, want %s", c.r.Method, c.info, got, c.want)
		}
	}
}

// The writer wrapper must keep the streaming interfaces watches and
// upgrades rely on.
func TestRecordingWriterInterfaces(t *testing.T) {
	var w http.ResponseWriter = &recordingWriter{ResponseWriter: httptest.NewRecorder()}
	if _, ok := w.(http.Flusher); !ok {
		t.Error("not a Flusher")
	}
	if _, ok := w.(http.Hijacker); !ok {
		t.Error("not a Hijacker")
	}
	if err := http.NewResponseController(w).Flush(); err != nil {
		t.Error(err)
	}
}

// Once a label set has been seen, recording a request allocates nothing.
func TestRequestMetricsObserveAllocs(t *testing.T) {
	m, err := NewRequestMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	rw := &recordingWriter{code: 200, labels: requestLabels{verb: "GET", version: "v1", resource: "pods", scope: "resource"}}
	m.observe(rw, time.Millisecond)
	if n := testing.AllocsPerRun(100, func() { m.observe(rw, time.Millisecond) }); n != 0 {
		t.Errorf("%v allocations per observe", n)
	}
}
