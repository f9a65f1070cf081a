package apiserver

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/controlplane/pki"
	"github.com/nodelet/nodelet/controlplane/registry"
	"github.com/nodelet/nodelet/controlplane/satoken"
	"github.com/nodelet/nodelet/controlplane/storage/bolt"
)

// newTokenEnv is newTestEnv with ServiceAccount tokens issued and
// authenticated, as the control plane wires them.
func newTokenEnv(t *testing.T) *testEnv {
	t.Helper()
	dir := t.TempDir()
	bundle, err := pki.Ensure(pki.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	store, err := bolt.Open(bolt.Config{Path: filepath.Join(dir, "state.db")})
	if err != nil {
		t.Fatal(err)
	}
	resources := registry.All()
	getter, err := NewObjectGetter(store, resources)
	if err != nil {
		t.Fatal(err)
	}
	key, err := satoken.LoadOrCreateKey(filepath.Join(dir, "sa.key"))
	if err != nil {
		t.Fatal(err)
	}
	issuer, err := satoken.New(satoken.Config{Key: key, Getter: getter})
	if err != nil {
		t.Fatal(err)
	}
	authn, err := NewAuthenticator(AuthnOptions{ServiceAccountTokens: issuer})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Store: store, Resources: resources, Authn: authn, Authz: AllowAuthenticated, Tokens: issuer,
		Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.EnsureDefaults(context.Background()); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(srv.Handler())
	ts.TLS = testTLS(t, bundle)
	ts.StartTLS()
	certPEM, keyPEM, err := bundle.SignClientCert("admin", []string{"system:masters"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ts.Close(); store.Close() })
	return &testEnv{srv: srv, store: store, ts: ts, config: &rest.Config{Host: ts.URL, QPS: -1,
		TLSClientConfig: rest.TLSClientConfig{CAData: bundle.CAPEM(), CertData: certPEM, KeyData: keyPEM}}}
}

// kubectl create token and in-cluster clients: a TokenRequest gives a
// bound JWT that authenticates as the ServiceAccount (upstream's groups and
// pod extras) while its pod exists, and not for another audience; the
// lifetime limits, a missing account and the discovery documents are
// upstream's.
func TestServiceAccountTokens(t *testing.T) {
	env := newTokenEnv(t)
	ctx := context.Background()
	cs := env.clientset(t)
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, err := cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p1"},
		Spec: corev1.PodSpec{ServiceAccountName: "robot", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	request := func(spec authenticationv1.TokenRequestSpec) (*authenticationv1.TokenRequest, error) {
		return cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, "robot", &authenticationv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
	}
	tr, err := request(authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{
		Kind: "Pod", APIVersion: "v1", Name: "p1", UID: pod.UID}})
	if err != nil {
		t.Fatalf("token request: %v", err)
	}
	if left := time.Until(tr.Status.ExpirationTimestamp.Time); tr.Status.Token == "" || left < 59*time.Minute || left > time.Hour {
		t.Fatalf("token expires in %v", left)
	}
	whoami := func(token string) (authenticationv1.UserInfo, error) {
		cfg := &rest.Config{Host: env.config.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: env.config.CAData}}
		r, err := newClientset(t, cfg).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			return authenticationv1.UserInfo{}, err
		}
		return r.Status.UserInfo, nil
	}
	u, err := whoami(tr.Status.Token)
	if err != nil {
		t.Fatalf("whoami with the token: %v", err)
	}
	if u.Username != "system:serviceaccount:default:robot" ||
		!slices.Equal(u.Groups, []string{"system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"}) ||
		!slices.Equal(u.Extra["authentication.kubernetes.io/pod-name"], []string{"p1"}) {
		t.Errorf("the token's user: %+v", u)
	}

	other, err := request(authenticationv1.TokenRequestSpec{Audiences: []string{"vault"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := whoami(other.Status.Token); !apierrors.IsUnauthorized(err) {
		t.Errorf("a token for another audience: %v, want 401", err)
	}
	// TokenReview: the same answers for whoever asks (the nodes' API, webhooks).
	review := func(token string, auds ...string) authenticationv1.TokenReviewStatus {
		r, err := cs.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
			Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: auds}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("token review: %v", err)
		}
		return r.Status
	}
	if st := review(tr.Status.Token); !st.Authenticated || st.User.Username != "system:serviceaccount:default:robot" ||
		!slices.Equal(st.Audiences, []string{satoken.DefaultIssuer}) {
		t.Errorf("review of the bound token: %+v", st)
	}
	if st := review(other.Status.Token, "vault"); !st.Authenticated || !slices.Equal(st.Audiences, []string{"vault"}) {
		t.Errorf("review of the vault token for vault: %+v", st)
	}
	if st := review("garbage"); st.Authenticated || st.Error == "" {
		t.Errorf("review of garbage: %+v", st)
	}
	if err := cs.CoreV1().Pods("default").Delete(ctx, "p1", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	if _, err := whoami(tr.Status.Token); !apierrors.IsUnauthorized(err) {
		t.Errorf("a token whose pod is gone: %v, want 401", err)
	}

	if _, err := request(authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](60)}); !apierrors.IsInvalid(err) {
		t.Errorf("a one-minute token: %v, want 422", err)
	}
	if _, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, "nobody", &authenticationv1.TokenRequest{}, metav1.CreateOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a token for a missing account: %v, want 404", err)
	}

	for path, check := range map[string]func(map[string]any) bool{
		"/.well-known/openid-configuration": func(m map[string]any) bool {
			return m["issuer"] == satoken.DefaultIssuer && m["jwks_uri"] == satoken.DefaultIssuer+"/openid/v1/jwks"
		},
		"/openid/v1/jwks": func(m map[string]any) bool {
			keys, _ := m["keys"].([]any)
			return len(keys) == 1 && keys[0].(map[string]any)["kty"] == "RSA"
		},
	} {
		code, _, body := rawDo(t, env, "GET", path, "", "", nil)
		var doc map[string]any
		if code != http.StatusOK || json.Unmarshal(body, &doc) != nil || !check(doc) {
			t.Errorf("%s: %d %s", path, code, body)
		}
	}
}
