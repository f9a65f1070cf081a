package apiserver

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/nodelet/nodelet/controlplane/pki"
	"github.com/nodelet/nodelet/controlplane/storage"
)

// fixedEndpoint resolves every Service to one URL.
type fixedEndpoint struct{ u *url.URL }

func (f fixedEndpoint) ResolveEndpoint(namespace, name string, port int32) (*url.URL, error) {
	c := *f.u
	return &c, nil
}

// seenRequest is what the extension server saw of one request.
type seenRequest struct {
	path, query, user, auth string
	groups                  []string
	clientCN                string
}

// TestAggregationProxy: a group-version set remote is proxied to the
// extension server with the caller in the front-proxy headers and the
// front-proxy client certificate (never the caller's token), is listed in
// discovery with the server's resources, answers 503 while unavailable
// and is gone once removed.
func TestAggregationProxy(t *testing.T) {
	bundle, err := pki.Ensure(pki.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	fp, err := bundle.FrontProxy()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []seenRequest
	backend := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := seenRequest{path: r.URL.Path, query: r.URL.RawQuery, user: r.Header.Get("X-Remote-User"),
			groups: r.Header.Values("X-Remote-Group"), auth: r.Header.Get("Authorization")}
		if len(r.TLS.PeerCertificates) > 0 {
			req.clientCN = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		mu.Lock()
		seen = append(seen, req)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"kind":"WidgetList","apiVersion":"example.com/v1","items":[]}`))
	}))
	caPool := x509.NewCertPool()
	caPool.AppendCertsFromPEM(fp.CAPEM)
	backend.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: caPool}
	backend.StartTLS()
	defer backend.Close()
	backendURL, _ := url.Parse(backend.URL)

	env := newTestEnvWith(t, storage.HubOptions{}, nil, func(c *Config) {
		c.FrontProxy = &fp.Client
		c.Endpoints = fixedEndpoint{backendURL}
	})
	gv := schema.GroupVersion{Group: "example.com", Version: "v1"}
	api := &RemoteAPI{GroupVersion: gv, Namespace: "ext", Service: "widgets", Port: 443, InsecureSkipTLSVerify: true,
		Available: true, Resources: &metav1.APIResourceList{GroupVersion: gv.String(), APIResources: []metav1.APIResource{
			{Name: "widgets", SingularName: "widget", Namespaced: true, Kind: "Widget", Verbs: []string{"get", "list"}}}}}
	if err := env.srv.SetRemoteAPI(gv, api); err != nil {
		t.Fatal(err)
	}

	client, err := rest.HTTPClientFor(env.config)
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string, header http.Header) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, env.config.Host+path, nil)
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	code, body := get("/apis/example.com/v1/namespaces/team/widgets?limit=5", http.Header{
		"Authorization": {"Bearer not-for-the-extension"}, "X-Remote-User": {"forged"}})
	if code != http.StatusOK || !strings.Contains(body, "WidgetList") {
		t.Fatalf("proxied list: %d %s", code, body)
	}
	mu.Lock()
	got := seen[len(seen)-1]
	mu.Unlock()
	if got.path != "/apis/example.com/v1/namespaces/team/widgets" || got.query != "limit=5" || got.user != "admin" ||
		got.auth != "" || got.clientCN != pki.FrontProxyUser || !contains(got.groups, "system:masters") {
		t.Fatalf("the extension server saw %+v", got)
	}

	// Discovery lists the remote group with the server's resources.
	_, lists, err := env.clientset(t).Discovery().ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, l := range lists {
		listed = listed || (l.GroupVersion == "example.com/v1" && len(l.APIResources) == 1 && l.APIResources[0].Name == "widgets")
	}
	if !listed {
		t.Fatal("discovery does not list example.com/v1 widgets")
	}
	if code, body := get("/apis/example.com", nil); code != http.StatusOK || !strings.Contains(body, `"example.com/v1"`) {
		t.Fatalf("GET /apis/example.com: %d %s", code, body)
	}

	api.Available = false
	if err := env.srv.SetRemoteAPI(gv, api); err != nil {
		t.Fatal(err)
	}
	if code, body := get("/apis/example.com/v1/widgets", nil); code != http.StatusServiceUnavailable {
		t.Fatalf("unavailable: %d %s", code, body)
	}
	if err := env.srv.SetRemoteAPI(gv, nil); err != nil {
		t.Fatal(err)
	}
	if code, _ := get("/apis/example.com/v1/widgets", nil); code != http.StatusNotFound {
		t.Fatalf("removed: %d, want 404", code)
	}
	var groups metav1.APIGroupList
	_, body = get("/apis", nil)
	if err := json.Unmarshal([]byte(body), &groups); err != nil {
		t.Fatal(err)
	}
	for _, g := range groups.Groups {
		if g.Name == "example.com" {
			t.Fatal("example.com still listed after removal")
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
