package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/nodelet/nodelet/controlplane/registry"
	"github.com/nodelet/nodelet/controlplane/storage/bolt"
)

type adminAuthn struct{}

func (adminAuthn) AuthenticateRequest(*http.Request) (*authenticator.Response, bool, error) {
	return &authenticator.Response{User: &user.DefaultInfo{Name: "admin", Groups: []string{"system:masters"}}}, true, nil
}

// newFuzzServer is the real server on bolt in a temporary directory, its
// default objects in place, serving the admin (system:masters).
func newFuzzServer(f *testing.F) *Server {
	store, err := bolt.Open(bolt.Config{Path: filepath.Join(f.TempDir(), "state.db")})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { store.Close() })
	srv, err := New(Config{Store: store, Resources: registry.All(),
		Authn: adminAuthn{}, Authz: AllowAuthenticated, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	if err := srv.EnsureDefaults(context.Background()); err != nil {
		f.Fatal(err)
	}
	return srv
}

// fuzzServe sends one request to h and returns the answer.
func fuzzServe(h http.Handler, method, target, ctype string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, "https://localhost"+target, bytes.NewReader(body))
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// checkRefusal fails t unless rec is a success or a deliberate refusal:
// a 4xx answered with a Kubernetes Status of the same code.
func checkRefusal(t *testing.T, what string, rec *httptest.ResponseRecorder) {
	t.Helper()
	if rec.Code < 400 {
		return
	}
	if rec.Code >= 500 {
		t.Fatalf("%s: HTTP %d: %s", what, rec.Code, rec.Body.String())
	}
	var st metav1.Status
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil || st.Kind != "Status" || st.APIVersion != "v1" ||
		st.Status != metav1.StatusFailure || int(st.Code) != rec.Code {
		t.Fatalf("%s: HTTP %d without a Status of its code (%v): %s", what, rec.Code, err, rec.Body.String())
	}
}

// FuzzRequests sends arbitrary bodies, content types and paths through the
// real handlers and storage: every answer must be a deliberate one (never
// a 500 from a recovered panic or an unexpected error).
func FuzzRequests(f *testing.F) {
	seeds := []struct{ method, path, ctype, body string }{
		{"POST", "/api/v1/namespaces/default/pods", "application/json", `{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i"}]}}`},
		{"POST", "/apis/apps/v1/namespaces/default/deployments", "application/yaml", "metadata: {name: d}\nspec: {selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: i}]}}}"},
		{"PATCH", "/api/v1/namespaces/default", "application/strategic-merge-patch+json", `{"metadata":{"labels":{"x":"y"}}}`},
		{"PATCH", "/api/v1/namespaces/default", "application/json-patch+json", `[{"op":"add","path":"/metadata/labels","value":{"a":"b"}}]`},
		{"PATCH", "/api/v1/namespaces/default", "application/merge-patch+json", `{"spec":{"finalizers":null}}`},
		{"PUT", "/api/v1/namespaces/default/finalize", "application/json", `{"metadata":{"name":"default"},"spec":{"finalizers":[]}}`},
		{"POST", "/api/v1/namespaces/default/pods/p/binding", "application/json", `{"target":{"name":"n1"}}`},
		{"PUT", "/apis/apps/v1/namespaces/default/deployments/d/scale", "application/json", `{"spec":{"replicas":-1}}`},
		{"DELETE", "/api/v1/namespaces/default/pods/p", "application/json", `{"gracePeriodSeconds":-5,"propagationPolicy":"Foreground"}`},
		{"GET", "/api/v1/pods?labelSelector=a%3Db&fieldSelector=spec.nodeName%3Dx&limit=1&continue=zz", "", ""},
		{"GET", "/api/v1/namespaces/default/services?watch=1&resourceVersion=999999&timeoutSeconds=1", "", ""},
		{"POST", "/api/v1/namespaces/default/services", "application/json", `{"metadata":{"name":"s"},"spec":{"type":"NodePort","clusterIP":"10.96.0.9","ports":[{"port":80,"nodePort":30001}]}}`},
		{"POST", "/api/v1/namespaces/default/configmaps", "application/vnd.kubernetes.protobuf", "k8s\x00\x0a\x0f"},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, s.ctype, []byte(s.body))
	}
	// A CertificateSigningRequest (its request a real PEM block) and its
	// approval: the parser of requests takes what clients send.
	csr, _ := json.Marshal(map[string]any{"metadata": map[string]string{"name": "c"}, "spec": map[string]any{
		"request": csrPEM(f, "system:node:n1", "system:nodes"), "signerName": "kubernetes.io/kube-apiserver-client-kubelet",
		"usages": []string{"digital signature", "client auth"}}})
	f.Add("POST", "/apis/certificates.k8s.io/v1/certificatesigningrequests", "application/json", csr)
	f.Add("PUT", "/apis/certificates.k8s.io/v1/certificatesigningrequests/c/approval", "application/json",
		[]byte(`{"metadata":{"name":"c"},"status":{"conditions":[{"type":"Approved","status":"True"}]}}`))
	h := newFuzzServer(f).Handler()
	f.Fuzz(func(t *testing.T, method, path, ctype string, body []byte) {
		switch method {
		case "GET", "POST", "PUT", "PATCH", "DELETE":
		default:
			return
		}
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " \t\r\n#") {
			return
		}
		req, err := http.NewRequest(method, "https://localhost"+path, bytes.NewReader(body))
		if err != nil {
			return
		}
		// Bound every watch (however its query is spelled).
		q := req.URL.Query()
		q.Set("timeoutSeconds", "1")
		req.URL.RawQuery = q.Encode()
		req.Header.Set("Content-Type", ctype)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 && rec.Code != http.StatusGatewayTimeout {
			t.Fatalf("%s %s (%s) %q: HTTP %d: %s", method, path, ctype, body, rec.Code, rec.Body.String())
		}
	})
}

type janeAuthn struct{}

func (janeAuthn) AuthenticateRequest(*http.Request) (*authenticator.Response, bool, error) {
	return &authenticator.Response{User: &user.DefaultInfo{Name: "jane", Groups: []string{user.AllAuthenticated}}}, true, nil
}

// refusingAuthz refuses everything and keeps the attributes it was asked.
type refusingAuthz struct {
	mu    sync.Mutex
	attrs []authorizer.Attributes
}

func (r *refusingAuthz) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attrs = append(r.attrs, a)
	return authorizer.DecisionDeny, "", nil
}

func (r *refusingAuthz) ConditionsAwareAuthorize(ctx context.Context, a authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(r.Authorize(ctx, a))
}

func (r *refusingAuthz) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

// FuzzAuthorizationAttributes sends arbitrary methods, paths and queries
// as a user the authorizer refuses: the attributes built from the URL
// are well-formed (a known verb; a resource request names a resource and
// a version; the path is the request's), and the answer is upstream's
// 403 naming the user, never a 5xx.
func FuzzAuthorizationAttributes(f *testing.F) {
	for _, s := range []struct{ method, target string }{
		{"GET", "/api/v1/namespaces/team/pods?watch=1&fieldSelector=spec.nodeName%3Dn1&labelSelector=a%3Db"},
		{"DELETE", "/api/v1/namespaces/team"},
		{"DELETE", "/apis/rbac.authorization.k8s.io/v1/namespaces/team/roles?labelSelector=a+in+(b"},
		{"POST", "/api/v1/namespaces/team/serviceaccounts/robot/token"},
		{"GET", "/api/v1/nodes/n1/proxy/metrics"},
		{"PATCH", "/apis/apps/v1/namespaces/a/deployments/d/scale"},
		{"GET", "/apis/metrics.k8s.io/v1beta1/nodes"},
		{"GET", "/openapi/v2"},
		{"PUT", "/api/v1/namespaces//pods/"},
		{"GET", "/apis/rbac.authorization.k8s.io"},
	} {
		f.Add(s.method, s.target)
	}
	store, err := bolt.Open(bolt.Config{Path: filepath.Join(f.TempDir(), "state.db")})
	if err != nil {
		f.Fatal(err)
	}
	defer store.Close()
	authz := &refusingAuthz{}
	srv, err := New(Config{Store: store, Resources: registry.All(),
		Authn: janeAuthn{}, Authz: authz, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	h := srv.Handler()
	verbs := map[string]bool{"get": true, "list": true, "watch": true, "create": true, "update": true, "patch": true,
		"delete": true, "deletecollection": true, "post": true, "put": true, "head": true, "options": true}
	f.Fuzz(func(t *testing.T, method, target string) {
		switch method {
		case "GET", "POST", "PUT", "PATCH", "DELETE":
		default:
			return
		}
		if !strings.HasPrefix(target, "/") || strings.ContainsAny(target, " \t\r\n#") {
			return
		}
		req, err := http.NewRequest(method, "https://localhost"+target, nil)
		if err != nil {
			return
		}
		authz.mu.Lock()
		authz.attrs = nil
		authz.mu.Unlock()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s: HTTP %d: %s", method, target, rec.Code, rec.Body.String())
		}
		authz.mu.Lock()
		asked := authz.attrs
		authz.mu.Unlock()
		for _, a := range asked {
			if a.GetUser() == nil || a.GetUser().GetName() != "jane" || !verbs[a.GetVerb()] || a.GetPath() != req.URL.Path {
				t.Fatalf("%s %s: attributes %+v", method, target, a)
			}
			if a.IsResourceRequest() && (a.GetResource() == "" || a.GetAPIVersion() == "") {
				t.Fatalf("%s %s: resource attributes without a resource or version: %+v", method, target, a)
			}
		}
		if len(asked) > 0 && (rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), `User \"jane\" cannot`)) {
			t.Fatalf("%s %s: refused with HTTP %d: %s", method, target, rec.Code, rec.Body.String())
		}
	})
}
