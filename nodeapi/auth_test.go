package nodeapi

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// TestRequestAttributes: upstream kubelet's (v1.37) description of each
// request: the verb from the method, the subresources in the order asked.
func TestRequestAttributes(t *testing.T) {
	for _, c := range []struct {
		method, path, verb string
		subresources       []string
	}{
		{"GET", "/stats/summary", "get", []string{"stats"}},
		{"GET", "/stats", "get", []string{"stats"}},
		{"GET", "/metrics", "get", []string{"metrics"}},
		{"GET", "/metrics/resource", "get", []string{"metrics"}},
		{"GET", "/metrics/probes", "get", []string{"metrics"}},
		{"GET", "/metricsfoo", "get", []string{"proxy"}},
		{"GET", "/logs/syslog", "get", []string{"log"}},
		{"POST", "/checkpoint/default/web/app", "create", []string{"checkpoint"}},
		{"GET", "/statusz", "get", []string{"statusz"}},
		{"GET", "/flagz", "get", []string{"configz"}},
		{"GET", "/pods", "get", []string{"pods", "proxy"}},
		{"GET", "/runningpods/", "get", []string{"pods", "proxy"}},
		{"GET", "/allocatedPods", "get", []string{"pods", "proxy"}},
		{"GET", "/healthz", "get", []string{"healthz", "proxy"}},
		{"GET", "/configz", "get", []string{"configz", "proxy"}},
		{"GET", "/containerLogs/default/web/app", "get", []string{"proxy"}},
		{"POST", "/exec/default/web/app", "create", []string{"proxy"}},
		{"PUT", "/x", "update", []string{"proxy"}},
		{"PATCH", "/x", "patch", []string{"proxy"}},
		{"DELETE", "/x", "delete", []string{"proxy"}},
		{"GET", "/debug/pprof/", "get", []string{"proxy"}},
		{"GET", "/stats/../pods", "get", []string{"pods", "proxy"}}, // as the mux routes it
	} {
		u := &user.DefaultInfo{Name: "jane"}
		attrs := requestAttributes(u, "node-1", httptest.NewRequest(c.method, c.path, nil))
		var subs []string
		for _, a := range attrs {
			subs = append(subs, a.GetSubresource())
			if a.GetVerb() != c.verb || a.GetResource() != "nodes" || a.GetName() != "node-1" || a.GetAPIVersion() != "v1" ||
				a.GetAPIGroup() != "" || a.GetNamespace() != "" || !a.IsResourceRequest() || a.GetUser() != u {
				t.Errorf("%s %s: %#v", c.method, c.path, a)
			}
		}
		if !slices.Equal(subs, c.subresources) {
			t.Errorf("%s %s: subresources %q, want %q", c.method, c.path, subs, c.subresources)
		}
	}
}

// fakeAPIServer answers the node's TokenReviews (one good token) and
// SubjectAccessReviews (a fixed set of grants), counting them.
type fakeAPIServer struct {
	mu              sync.Mutex
	grants          map[string]bool // "user verb subresource"
	asked           []string
	tokenReviews    int
	failTokens      error
	failAuthorizing error
}

const prometheus = "system:serviceaccount:monitoring:prometheus"

func (f *fakeAPIServer) client() *fake.Clientset {
	c := fake.NewClientset()
	c.PrependReactor("create", "tokenreviews", func(a clienttesting.Action) (bool, apiruntime.Object, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.tokenReviews++
		if f.failTokens != nil {
			return true, nil, f.failTokens
		}
		tr := a.(clienttesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		if tr.Spec.Token == "good-token" {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{
				Username: prometheus, UID: "uid-1", Groups: []string{"system:serviceaccounts", "system:authenticated"},
				Extra: map[string]authenticationv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"prom-0"}}}}
		}
		return true, tr, nil
	})
	c.PrependReactor("create", "subjectaccessreviews", func(a clienttesting.Action) (bool, apiruntime.Object, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.failAuthorizing != nil {
			return true, nil, f.failAuthorizing
		}
		sar := a.(clienttesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		ra := sar.Spec.ResourceAttributes
		if ra == nil || ra.Resource != "nodes" || ra.Name != "node-1" || ra.Version != "v1" {
			return true, nil, errors.New("unexpected review")
		}
		k := sar.Spec.User + " " + ra.Verb + " " + ra.Subresource
		if sar.Spec.User == prometheus && (sar.Spec.UID != "uid-1" || len(sar.Spec.Extra["authentication.kubernetes.io/pod-name"]) != 1) {
			k += " (without its UID or extra)"
		}
		f.asked = append(f.asked, k)
		sar.Status.Allowed = f.grants[k]
		return true, sar, nil
	})
	return c
}

func (f *fakeAPIServer) take() (asked []string, tokenReviews int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	asked, tokenReviews = f.asked, f.tokenReviews
	f.asked, f.tokenReviews = nil, 0
	return asked, tokenReviews
}

func delegatedNode(t *testing.T, api *fakeAPIServer, ac AccessConfig) *testNode {
	t.Helper()
	return newTestNode(t, func(c *Config) {
		authn, authz, err := Delegated(ac, api.client(), c.ClientCAs)
		if err != nil {
			t.Fatal(err)
		}
		c.NodeName, c.Authenticator, c.Authorizer = "node-1", authn, authz
	})
}

func bearer(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }

// TestDelegatedDecides: with upstream kubelet's defaults, bearer tokens
// are reviewed by the API server and every caller, certificates
// included, is authorized by it, as upstream's kubelet asks: nodes/stats,
// nodes/metrics, nodes/pods before nodes/proxy, the verb from the method.
func TestDelegatedDecides(t *testing.T) {
	api := &fakeAPIServer{grants: map[string]bool{prometheus + " get metrics": true, prometheus + " get stats": true,
		"jane get pods": true, "jane create proxy": true, APIServerUser + " get proxy": true}}
	n := delegatedNode(t, api, DefaultAccessConfig())
	webPod(n)
	for _, c := range []struct {
		who, method, path string
		header            http.Header
		want              int // 0: past authentication and authorization (the handler answers)
		asked             []string
	}{
		{"anonymous", "GET", "/metrics/resource", bearer("good-token"), 0, []string{prometheus + " get metrics"}},
		{"anonymous", "GET", "/stats/summary", bearer("good-token"), 0, []string{prometheus + " get stats"}},
		{"anonymous", "GET", "/metrics/probes", bearer("good-token"), 0, nil}, // the same question, cached
		{"anonymous", "GET", "/pods", bearer("good-token"), http.StatusForbidden, []string{prometheus + " get pods", prometheus + " get proxy"}},
		{"anonymous", "GET", "/metrics", bearer("bad-token"), http.StatusUnauthorized, nil},
		{"anonymous", "GET", "/metrics", nil, http.StatusUnauthorized, nil},
		{"user", "GET", "/pods", nil, 0, []string{"jane get pods"}},
		{"user", "POST", "/run/default/web/app?cmd=ls", nil, 0, []string{"jane create proxy"}},
		{"user", "GET", "/containerLogs/default/web/app", nil, http.StatusForbidden, []string{"jane get proxy"}},
		{"user", "GET", "/debug/pprof/cmdline", nil, http.StatusForbidden, nil}, // a refusal is cached too
		{"user", "GET", "/healthz", nil, http.StatusForbidden, []string{"jane get healthz"}},
		{"apiserver", "GET", "/healthz", nil, 0, []string{APIServerUser + " get healthz", APIServerUser + " get proxy"}},
		// A certificate wins over a token (the union's order).
		{"user", "GET", "/metrics", bearer("good-token"), http.StatusForbidden, []string{"jane get metrics"}},
	} {
		api.take()
		code, body := n.doHeader(t, c.who, c.method, c.path, c.header)
		asked, _ := api.take()
		passed := code != http.StatusUnauthorized && code != http.StatusForbidden
		if (c.want == 0) != passed || (c.want != 0 && code != c.want) || !slices.Equal(asked, c.asked) {
			t.Errorf("%s %s as %s: %d, asked %q; want %d, %q (%s)", c.method, c.path, c.who, code, asked, c.want, c.asked, body)
		}
	}
	// Each token is reviewed once while its answer is cached (2 min),
	// a bad one too.
	for range 3 {
		n.doHeader(t, "anonymous", "GET", "/metrics/resource", bearer("good-token"))
		n.doHeader(t, "anonymous", "GET", "/metrics/resource", bearer("bad-token"))
	}
	if _, reviews := api.take(); reviews != 0 {
		t.Errorf("%d token reviews for cached tokens", reviews)
	}
	n.doHeader(t, "anonymous", "GET", "/metrics/resource", bearer("new-token"))
	if _, reviews := api.take(); reviews != 1 {
		t.Errorf("%d token reviews for a new token, want 1", reviews)
	}
	code, body := n.doHeader(t, "anonymous", "GET", "/pods", bearer("good-token"))
	if want := "Forbidden (user=" + prometheus + ", verb=get, resource=nodes, subresource(s)=[pods proxy])\n"; code != http.StatusForbidden || body != want {
		t.Errorf("forbidden answer: %d %q, want %q", code, body, want)
	}
}

// TestDelegatedFailures: an API server that cannot review a token leaves
// the caller unauthenticated (401), one that cannot authorize is upstream
// kubelet's 500 naming the question.
func TestDelegatedFailures(t *testing.T) {
	api := &fakeAPIServer{failTokens: apierrors.NewForbidden(authenticationv1.Resource("tokenreviews"), "", errors.New("no")),
		failAuthorizing: apierrors.NewForbidden(authorizationv1.Resource("subjectaccessreviews"), "", errors.New("no"))}
	n := delegatedNode(t, api, DefaultAccessConfig())
	if code, body := n.doHeader(t, "anonymous", "GET", "/metrics", bearer("good-token")); code != http.StatusUnauthorized || body != "Unauthorized" {
		t.Errorf("token review failed: %d %q", code, body)
	}
	if _, reviews := api.take(); reviews != 1 {
		t.Errorf("%d token reviews; a refusal is not retried", reviews)
	}
	if code, body := n.doAs(t, "user", "GET", "/metrics"); code != http.StatusInternalServerError ||
		body != "Authorization error (user=jane, verb=get, resource=nodes, subresource=metrics)" {
		t.Errorf("authorization failed: %d %q", code, body)
	}
}

// TestDelegatedModes: AlwaysAllow lets every authenticated caller in;
// without webhook authentication a token is not looked at; Anonymous
// makes callers without credentials system:anonymous, whom the
// authorizer judges.
func TestDelegatedModes(t *testing.T) {
	api := &fakeAPIServer{grants: map[string]bool{"system:anonymous get healthz": true}}
	allow := DefaultAccessConfig()
	allow.AuthorizationMode = AuthorizationModeAlwaysAllow
	n := delegatedNode(t, api, allow)
	for _, c := range []struct {
		who    string
		header http.Header
		want   int
	}{{"user", nil, 200}, {"anonymous", bearer("good-token"), 200}, {"anonymous", bearer("bad-token"), 401}, {"anonymous", nil, 401}} {
		if code, body := n.doHeader(t, c.who, "GET", "/metrics/resource", c.header); code != c.want {
			t.Errorf("AlwaysAllow, %s %v: %d, want %d (%s)", c.who, c.header, code, c.want, body)
		}
	}

	noWebhook := DefaultAccessConfig()
	noWebhook.Webhook = false
	n = delegatedNode(t, api, noWebhook)
	api.take()
	if code, _ := n.doHeader(t, "anonymous", "GET", "/metrics/resource", bearer("good-token")); code != http.StatusUnauthorized {
		t.Errorf("a token without webhook authentication: %d", code)
	}
	if _, reviews := api.take(); reviews != 0 {
		t.Errorf("%d token reviews without webhook authentication", reviews)
	}

	anon := DefaultAccessConfig()
	anon.Anonymous = true
	n = delegatedNode(t, api, anon)
	if code, body := n.doAs(t, "anonymous", "GET", "/healthz"); code != http.StatusOK || body != "ok" {
		t.Errorf("anonymous /healthz with the grant: %d %q", code, body)
	}
	if code, body := n.doAs(t, "anonymous", "GET", "/pods"); code != http.StatusForbidden ||
		body != "Forbidden (user=system:anonymous, verb=get, resource=nodes, subresource(s)=[pods proxy])\n" {
		t.Errorf("anonymous /pods: %d %q", code, body)
	}
	// A token that fails is still 401, not anonymous.
	if code, _ := n.doHeader(t, "anonymous", "GET", "/healthz", bearer("bad-token")); code != http.StatusUnauthorized {
		t.Errorf("a bad token with anonymous access: %d", code)
	}

	for name, ac := range map[string]AccessConfig{
		"no mode":      {Webhook: true},
		"unknown mode": {Webhook: true, AuthorizationMode: "RBAC"},
		"no method":    {AuthorizationMode: AuthorizationModeAlwaysAllow},
		"webhook, nil": DefaultAccessConfig(),
	} {
		var cas = newTestCA(t, "ca").pool
		var client kubernetes.Interface = api.client()
		if name == "no method" {
			cas = nil
		}
		if name == "webhook, nil" {
			client = nil
		}
		if _, _, err := Delegated(ac, client, cas); err == nil {
			t.Errorf("%s: Delegated succeeded", name)
		}
	}
}
