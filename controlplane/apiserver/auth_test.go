package apiserver

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// The chain in kube-apiserver's order: a known bearer token is its user in
// system:authenticated; a bad one is refused (401), never anonymous; no
// credentials are refused, or system:anonymous with --anonymous-auth,
// whom the interim authorizer refuses.
func TestAuthenticatorChain(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(file, []byte("secret,alice,1,\"devs,ops\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, anon := range []bool{false, true} {
		authn, err := NewAuthenticator(AuthnOptions{TokenFile: file, Anonymous: anon})
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest("GET", "/api/v1/namespaces", nil)
		r.Header.Set("Authorization", "Bearer secret")
		resp, ok, err := authn.AuthenticateRequest(r)
		if err != nil || !ok || resp.User.GetName() != "alice" ||
			!slices.Equal(resp.User.GetGroups(), []string{"devs", "ops", "system:authenticated"}) {
			t.Errorf("anonymous=%v, good token: %+v %v %v", anon, resp, ok, err)
		}
		r.Header.Set("Authorization", "Bearer wrong")
		if _, ok, err := authn.AuthenticateRequest(r); ok || err == nil {
			t.Errorf("anonymous=%v, bad token: ok=%v err=%v, want an error", anon, ok, err)
		}
		r.Header.Del("Authorization")
		resp, ok, err = authn.AuthenticateRequest(r)
		if !anon {
			if ok || err != nil {
				t.Errorf("no credentials: ok=%v err=%v, want neither", ok, err)
			}
			continue
		}
		if err != nil || !ok || resp.User.GetName() != "system:anonymous" || !slices.Equal(resp.User.GetGroups(), []string{"system:unauthenticated"}) {
			t.Fatalf("anonymous: %+v %v %v", resp, ok, err)
		}
		attrs := &authorizer.AttributesRecord{User: resp.User, Verb: "list", Resource: "namespaces", ResourceRequest: true}
		if d, _, _ := AllowAuthenticated.Authorize(context.Background(), attrs); d != authorizer.DecisionDeny {
			t.Errorf("the interim authorizer allowed system:anonymous")
		}
		if got := forbiddenMessage(attrs); got != `User "system:anonymous" cannot list resource "namespaces" in API group "" at the cluster scope` {
			t.Errorf("message: %s", got)
		}
	}
}
