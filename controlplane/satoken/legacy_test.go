package satoken

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/kubernetes/pkg/serviceaccount"
)

// TestLegacySecretToken: a token the tokens controller wrote into a
// Secret authenticates as its account while the Secret holds it, and not
// once the Secret is gone or holds another token; without a Secrets
// client legacy tokens are not accepted at all.
func TestLegacySecretToken(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "ci", Namespace: "team", UID: "sa-uid"}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ci-token", Namespace: "team", UID: "secret-uid",
		Annotations: map[string]string{corev1.ServiceAccountNameKey: "ci", corev1.ServiceAccountUIDKey: "sa-uid"}},
		Type: corev1.SecretTypeServiceAccountToken}
	gen, err := LegacyGenerator(key)
	if err != nil {
		t.Fatal(err)
	}
	claims, private := serviceaccount.LegacyClaims(*sa, *secret)
	token, err := gen.GenerateToken(context.Background(), claims, private)
	if err != nil {
		t.Fatal(err)
	}
	secret.Data = map[string][]byte{corev1.ServiceAccountTokenKey: []byte(token)}
	o := &objects{accounts: map[string]*corev1.ServiceAccount{"team/ci": sa}, secrets: map[string]*corev1.Secret{"team/ci-token": secret}}
	client := fake.NewClientset(secret)
	i, err := New(Config{Key: key, Getter: o, Secrets: client.CoreV1()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	resp, ok, err := i.AuthenticateToken(ctx, token)
	if err != nil || !ok || resp.User.GetName() != "system:serviceaccount:team:ci" {
		t.Fatalf("legacy token: %v %v %+v", ok, err, resp)
	}

	other := secret.DeepCopy()
	other.Data[corev1.ServiceAccountTokenKey] = []byte("another")
	o.mu.Lock()
	o.secrets["team/ci-token"] = other
	o.mu.Unlock()
	if _, ok, _ := i.AuthenticateToken(ctx, token); ok {
		t.Error("a token its Secret no longer holds authenticated")
	}
	o.mu.Lock()
	delete(o.secrets, "team/ci-token")
	o.mu.Unlock()
	if _, ok, _ := i.AuthenticateToken(ctx, token); ok {
		t.Error("a token whose Secret is gone authenticated")
	}

	o.mu.Lock()
	o.secrets["team/ci-token"] = secret
	o.mu.Unlock()
	plain, err := New(Config{Key: key, Getter: o})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := plain.AuthenticateToken(ctx, token); ok {
		t.Error("legacy token accepted without a Secrets client")
	}
}
