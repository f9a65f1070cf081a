package satoken

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/go-jose/go-jose.v2/jwt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/serviceaccount"
)

// objects is an in-memory Getter: the accounts and pods a token names.
type objects struct {
	mu       sync.Mutex
	accounts map[string]*corev1.ServiceAccount
	pods     map[string]*corev1.Pod
	secrets  map[string]*corev1.Secret
}

func notFound(res, name string) error {
	return apierrors.NewNotFound(schema.GroupResource{Resource: res}, name)
}

func (o *objects) GetServiceAccount(_ context.Context, ns, name string) (*corev1.ServiceAccount, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if sa, ok := o.accounts[ns+"/"+name]; ok {
		return sa, nil
	}
	return nil, notFound("serviceaccounts", name)
}

func (o *objects) GetPod(_ context.Context, ns, name string) (*corev1.Pod, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if p, ok := o.pods[ns+"/"+name]; ok {
		return p, nil
	}
	return nil, notFound("pods", name)
}

func (o *objects) GetSecret(_ context.Context, ns, name string) (*corev1.Secret, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if sec, ok := o.secrets[ns+"/"+name]; ok {
		return sec, nil
	}
	return nil, notFound("secrets", name)
}

func (o *objects) GetNode(_ context.Context, name string) (*corev1.Node, error) {
	return nil, notFound("nodes", name)
}

func (o *objects) GetValidatingWebhookConfiguration(_ context.Context, name string) (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	return nil, notFound("validatingwebhookconfigurations", name)
}

func (o *objects) GetMutatingWebhookConfiguration(_ context.Context, name string) (*admissionregistrationv1.MutatingWebhookConfiguration, error) {
	return nil, notFound("mutatingwebhookconfigurations", name)
}

func newIssuer(tb testing.TB) (*Issuer, *objects) {
	tb.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatal(err)
	}
	o := &objects{
		accounts: map[string]*corev1.ServiceAccount{"team/robot": {ObjectMeta: metav1.ObjectMeta{Name: "robot", Namespace: "team", UID: "sa-uid"}}},
		pods:     map[string]*corev1.Pod{"team/web": {ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team", UID: "pod-uid"}}},
	}
	i, err := New(Config{Key: key, Getter: o})
	if err != nil {
		tb.Fatal(err)
	}
	return i, o
}

// podToken issues a one-hour token of team/robot bound to team/web.
func podToken(tb testing.TB, i *Issuer, o *objects) string {
	tb.Helper()
	tok, _, err := i.Issue(context.Background(), o.accounts["team/robot"], o.pods["team/web"], nil, nil, 3600, i.Audiences())
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// TestBoundTokenLivesWithItsPod: a token bound to a pod authenticates as
// the account, with the pod in its extra, until the pod is deleted (or
// recreated with another uid); a token for another audience never does.
func TestBoundTokenLivesWithItsPod(t *testing.T) {
	i, o := newIssuer(t)
	ctx := context.Background()
	tok := podToken(t, i, o)
	resp, ok, err := i.AuthenticateToken(ctx, tok)
	if err != nil || !ok || resp.User.GetName() != "system:serviceaccount:team:robot" ||
		strings.Join(resp.User.GetExtra()["authentication.kubernetes.io/pod-name"], "") != "web" {
		t.Fatalf("bound token: ok=%v err=%v resp=%+v", ok, err, resp)
	}
	other, _, err := i.Issue(ctx, o.accounts["team/robot"], o.pods["team/web"], nil, nil, 3600, []string{"vault"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := i.AuthenticateToken(ctx, other); ok {
		t.Errorf("a token for audience vault authenticated to the API server")
	}
	o.mu.Lock()
	o.pods["team/web"] = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team", UID: "new-uid"}}
	o.mu.Unlock()
	if _, ok, _ := i.AuthenticateToken(ctx, tok); ok {
		t.Errorf("the token of a pod recreated with another uid still authenticates")
	}
	o.mu.Lock()
	delete(o.pods, "team/web")
	o.mu.Unlock()
	if _, ok, _ := i.AuthenticateToken(ctx, tok); ok {
		t.Errorf("the token of a deleted pod still authenticates")
	}
}

// FuzzAuthenticateToken: whatever a bearer token holds, authentication
// answers without panicking, and only the issued token's bytes (or an
// equivalent spelling of them) authenticate, always as its account.
func FuzzAuthenticateToken(f *testing.F) {
	i, o := newIssuer(f)
	tok := podToken(f, i, o)
	parts := strings.Split(tok, ".")
	f.Add(tok)
	f.Add(parts[0] + "." + parts[1] + ".")
	f.Add(parts[0] + ".eyJpc3MiOiJ4In0." + parts[2])
	f.Add("eyJhbGciOiJub25lIn0." + parts[1] + ".")
	f.Add("not-a-jwt")
	f.Add("a.b.c.d.e")
	f.Fuzz(func(t *testing.T, token string) {
		resp, ok, _ := i.AuthenticateToken(context.Background(), token)
		if ok && (resp == nil || resp.User.GetName() != "system:serviceaccount:team:robot") {
			t.Fatalf("token %q authenticated as %+v", token, resp)
		}
	})
}

// TestExpiredTokenRefused: a token past its expiry (and past upstream's
// minute of leeway) does not authenticate, though its pod still exists.
func TestExpiredTokenRefused(t *testing.T) {
	i, o := newIssuer(t)
	ctx := context.Background()
	claims, private, err := serviceaccount.Claims(core.ServiceAccount{ObjectMeta: o.accounts["team/robot"].ObjectMeta},
		&core.Pod{ObjectMeta: o.pods["team/web"].ObjectMeta}, nil, nil, nil, nil, 3600, 0, i.Audiences(), nil)
	if err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-2 * time.Hour)
	claims.IssuedAt, claims.NotBefore = jwt.NewNumericDate(past), jwt.NewNumericDate(past)
	claims.Expiry = jwt.NewNumericDate(past.Add(time.Hour))
	tok, err := i.gen.GenerateToken(ctx, claims, private)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := i.AuthenticateToken(ctx, tok); ok || err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired token: ok=%v err=%v, want refused as expired", ok, err)
	}
}
