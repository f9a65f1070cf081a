package upstream

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/controlplane/controlplanetest"
	"github.com/nodelet/nodelet/controlplane/satoken"
	"github.com/nodelet/nodelet/test/testkit"
)

// Upstream's tokens controller fills a Secret of type
// kubernetes.io/service-account-token that a user creates for an account:
// a legacy token (issuer kubernetes/serviceaccount) naming the account and
// the Secret, the cluster CA and the namespace.
func TestLegacyTokenSecret(t *testing.T) {
	srv := controlplanetest.Start(t, controlplanetest.Options{})
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	gen, err := satoken.LegacyGenerator(key)
	if err != nil {
		t.Fatal(err)
	}
	cs := startOn(t, srv, Config{Root: srv.Config, LegacyTokens: gen})
	ctx := t.Context()
	ns := "legacy"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sa, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "ci"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ci-token",
		Annotations: map[string]string{corev1.ServiceAccountNameKey: "ci"}}, Type: corev1.SecretTypeServiceAccountToken},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var secret *corev1.Secret
	testkit.Eventually(t, 30*time.Second, "token in the secret", func(ctx context.Context) (bool, error) {
		secret, err = cs.CoreV1().Secrets(ns).Get(ctx, "ci-token", metav1.GetOptions{})
		return err == nil && len(secret.Data[corev1.ServiceAccountTokenKey]) > 0, err
	})
	if string(secret.Data[corev1.ServiceAccountRootCAKey]) != string(srv.Bundle.CAPEM()) || string(secret.Data[corev1.ServiceAccountNamespaceKey]) != ns {
		t.Errorf("ca.crt or namespace wrong: %q", secret.Data[corev1.ServiceAccountNamespaceKey])
	}
	if secret.Annotations[corev1.ServiceAccountUIDKey] != string(sa.UID) {
		t.Errorf("annotations %v: want the account's uid %s", secret.Annotations, sa.UID)
	}
	parts := strings.Split(string(secret.Data[corev1.ServiceAccountTokenKey]), ".")
	if len(parts) != 3 {
		t.Fatalf("token is not a JWT: %d parts", len(parts))
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	if claims["iss"] != "kubernetes/serviceaccount" || claims["sub"] != "system:serviceaccount:legacy:ci" ||
		claims["kubernetes.io/serviceaccount/secret.name"] != "ci-token" {
		t.Errorf("claims %v", claims)
	}
}
