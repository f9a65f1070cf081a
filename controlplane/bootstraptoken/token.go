// Package bootstraptoken is how nodes join the cluster by token, kubeadm's
// way, on the control plane's side: bootstrap tokens (Secrets of type
// bootstrap.kubernetes.io/token in kube-system) that `controlplane token
// create` makes, the API server's authenticator for them (upstream's), and
// kube-public's cluster-info ConfigMap, which a joining node reads
// anonymously and trusts once the bootstrap signer's JWS signature for its
// token and the CA's hash both check out.
package bootstraptoken

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
)

// DefaultTTL is kubeadm's: a token expires a day after it was made.
const DefaultTTL = 24 * time.Hour

// Token is a bootstrap token to create.
type Token struct {
	// TTL is how long it authenticates (0: DefaultTTL; negative: forever).
	TTL time.Duration
	// Groups are extra groups its holders are in, besides
	// system:bootstrappers (each must start with system:bootstrappers:).
	Groups []string
	// Description is kept in the Secret for people.
	Description string
}

// Create stores a new bootstrap token, usable for authentication and for
// signing cluster-info, and returns it ("ID.SECRET").
func Create(ctx context.Context, cs kubernetes.Interface, t Token, now time.Time) (string, error) {
	token, err := bootstraputil.GenerateBootstrapToken()
	if err != nil {
		return "", fmt.Errorf("generate a bootstrap token: %w", err)
	}
	secret, err := Secret(token, t, now)
	if err != nil {
		return "", err
	}
	if _, err := cs.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("create bootstrap token secret %s: %w", secret.Name, err)
	}
	return token, nil
}

// Secret is the kube-system Secret that holds token, as kubeadm writes it.
func Secret(token string, t Token, now time.Time) (*corev1.Secret, error) {
	id, secret, err := parse(token)
	if err != nil {
		return nil, err
	}
	for _, g := range t.Groups {
		if err := bootstraputil.ValidateBootstrapGroupName(g); err != nil {
			return nil, err
		}
	}
	data := map[string][]byte{
		bootstrapapi.BootstrapTokenIDKey:               []byte(id),
		bootstrapapi.BootstrapTokenSecretKey:           []byte(secret),
		bootstrapapi.BootstrapTokenUsageAuthentication: []byte("true"),
		bootstrapapi.BootstrapTokenUsageSigningKey:     []byte("true"),
	}
	if t.Description != "" {
		data[bootstrapapi.BootstrapTokenDescriptionKey] = []byte(t.Description)
	}
	if len(t.Groups) > 0 {
		data[bootstrapapi.BootstrapTokenExtraGroupsKey] = []byte(strings.Join(t.Groups, ","))
	}
	ttl := t.TTL
	if ttl == 0 {
		ttl = DefaultTTL
	}
	if ttl > 0 {
		data[bootstrapapi.BootstrapTokenExpirationKey] = []byte(now.Add(ttl).UTC().Format(time.RFC3339))
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: bootstraputil.BootstrapTokenSecretName(id), Namespace: metav1.NamespaceSystem},
		Type:       corev1.SecretType(bootstrapapi.SecretTypeBootstrapToken),
		Data:       data,
	}, nil
}

// ErrMalformed: a token is not "ID.SECRET" of 6 and 16 characters [a-z0-9].
var ErrMalformed = errors.New("malformed bootstrap token")

// parse splits a token into its ID and secret.
func parse(token string) (id, secret string, err error) {
	if !bootstraputil.IsValidBootstrapToken(token) {
		return "", "", fmt.Errorf("%w: want [a-z0-9]{6}.[a-z0-9]{16}", ErrMalformed)
	}
	return token[:6], token[7:], nil
}

// CAHash is how kubeadm pins a CA (--discovery-token-ca-cert-hash): the
// SHA-256 of its SubjectPublicKeyInfo, "sha256:" and hex.
func CAHash(ca *x509.Certificate) string {
	sum := sha256.Sum256(ca.RawSubjectPublicKeyInfo)
	return "sha256:" + hex.EncodeToString(sum[:])
}
