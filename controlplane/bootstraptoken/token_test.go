package bootstraptoken

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
)

type secretMap map[string]*corev1.Secret

func (m secretMap) GetSecret(_ context.Context, ns, name string) (*corev1.Secret, error) {
	if s, ok := m[ns+"/"+name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

// A token's Secret is kubeadm's, and upstream's authenticator takes it
// until it expires: the right secret only, as system:bootstrap:ID in
// system:bootstrappers and the extra group.
func TestTokenAuthenticates(t *testing.T) {
	now := time.Now()
	const tok = "abcdef.0123456789abcdef"
	s, err := Secret(tok, Token{Groups: []string{"system:bootstrappers:kubeadm:default-node-token"}, Description: "test"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "bootstrap-token-abcdef" || s.Namespace != "kube-system" || s.Type != "bootstrap.kubernetes.io/token" ||
		string(s.Data["token-secret"]) != "0123456789abcdef" || string(s.Data["usage-bootstrap-signing"]) != "true" {
		t.Fatalf("secret %+v", s)
	}
	if exp, err := time.Parse(time.RFC3339, string(s.Data["expiration"])); err != nil || exp.Sub(now) < 23*time.Hour {
		t.Errorf("expiration %q (%v): want a day from now", s.Data["expiration"], err)
	}
	authn := Authenticator(secretMap{"kube-system/" + s.Name: s})
	resp, ok, err := authn.AuthenticateToken(context.Background(), tok)
	if err != nil || !ok || resp.User.GetName() != "system:bootstrap:abcdef" ||
		!slices.Equal(resp.User.GetGroups(), []string{"system:bootstrappers", "system:bootstrappers:kubeadm:default-node-token"}) {
		t.Fatalf("authenticate: %+v %v %v", resp, ok, err)
	}
	for _, bad := range []string{"abcdef.0123456789abcdee", "abcdeg.0123456789abcdef", "not-a-token", ""} {
		if _, ok, err := authn.AuthenticateToken(context.Background(), bad); ok || err != nil {
			t.Errorf("token %q: authenticated %v, err %v", bad, ok, err)
		}
	}
	expired, _ := Secret(tok, Token{TTL: time.Minute}, now.Add(-time.Hour))
	if _, ok, _ := Authenticator(secretMap{"kube-system/" + s.Name: expired}).AuthenticateToken(context.Background(), tok); ok {
		t.Error("an expired token authenticated")
	}
	if _, err := Secret("ABCDEF.0123456789abcdef", Token{}, now); !errors.Is(err, ErrMalformed) {
		t.Errorf("upper-case token: %v", err)
	}
	if _, err := Secret(tok, Token{Groups: []string{"system:masters"}}, now); err == nil {
		t.Error("a group outside system:bootstrappers: was accepted")
	}
}

// The CA hash is kubeadm's: sha256 over the SubjectPublicKeyInfo.
func TestCAHash(t *testing.T) {
	ca := &x509.Certificate{RawSubjectPublicKeyInfo: []byte("spki")}
	sum := sha256.Sum256([]byte("spki"))
	if got := CAHash(ca); got != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Errorf("CAHash = %s", got)
	}
}

func TestClusterInfoKubeconfig(t *testing.T) {
	data, err := Kubeconfig("https://10.0.0.1:6443", []byte("CA"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.Load(data)
	if err != nil || cfg.Clusters[""] == nil || cfg.Clusters[""].Server != "https://10.0.0.1:6443" ||
		string(cfg.Clusters[""].CertificateAuthorityData) != "CA" || len(cfg.AuthInfos) != 0 {
		t.Errorf("cluster-info kubeconfig %s (%v)", data, err)
	}
}
