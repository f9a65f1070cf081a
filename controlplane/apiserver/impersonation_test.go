package apiserver

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/rest"
)

// kubectl --as and --as-group: a caller allowed to impersonate acts as the
// named user, service account, groups and extras (upstream's group
// rules); one refused gets upstream's 403, and groups without a user 400.
func TestImpersonation(t *testing.T) {
	authz := authorizer.AuthorizerFunc(func(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		if a.GetVerb() == "impersonate" && a.GetName() == "root" {
			return authorizer.DecisionDeny, "", nil
		}
		return authorizer.DecisionAllow, "", nil
	})
	env := newMetricsEnv(t, testMetrics(), authz)
	whoami := func(imp rest.ImpersonationConfig) (authenticationv1.UserInfo, error) {
		cfg := rest.CopyConfig(env.config)
		cfg.Impersonate = imp
		r, err := newClientset(t, cfg).AuthenticationV1().SelfSubjectReviews().Create(context.Background(),
			&authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			return authenticationv1.UserInfo{}, err
		}
		return r.Status.UserInfo, nil
	}
	for _, tc := range []struct {
		name string
		imp  rest.ImpersonationConfig
		want authenticationv1.UserInfo
	}{
		{"user, groups and extras", rest.ImpersonationConfig{UserName: "bob", UID: "42", Groups: []string{"team"}, Extra: map[string][]string{"scopes": {"a", "b"}}},
			authenticationv1.UserInfo{Username: "bob", UID: "42", Groups: []string{"team", "system:authenticated"},
				Extra: map[string]authenticationv1.ExtraValue{"scopes": {"a", "b"}}}},
		{"service account", rest.ImpersonationConfig{UserName: "system:serviceaccount:ns1:robot"},
			authenticationv1.UserInfo{Username: "system:serviceaccount:ns1:robot",
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ns1", "system:authenticated"}}},
		{"anonymous", rest.ImpersonationConfig{UserName: "system:anonymous"},
			authenticationv1.UserInfo{Username: "system:anonymous", Groups: []string{"system:unauthenticated"}}},
	} {
		got, err := whoami(tc.imp)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, %v\nwant %+v", tc.name, got, err, tc.want)
		}
	}

	_, err := whoami(rest.ImpersonationConfig{UserName: "root"})
	want := `users "root" is forbidden: User "admin" cannot impersonate resource "users" in API group "" at the cluster scope`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("impersonating root: %v\nwant %s", err, want)
	}
	hc, err := rest.HTTPClientFor(env.config)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", env.config.Host+"/api/v1/namespaces", nil)
	req.Header.Set("Impersonate-Group", "team")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a group without a user: %d", resp.StatusCode)
	}
}
