// Package satoken issues and verifies ServiceAccount tokens with upstream's
// code (k8s.io/kubernetes/pkg/serviceaccount), as kube-apiserver does:
// JWTs signed by the control plane's own key, naming the account and the
// pod, secret or node they are bound to; on use, validated against those
// objects (a token whose pod is gone, or was recreated, is refused); and
// the issuer's OpenID discovery documents, so that relying parties outside
// the cluster can verify the tokens. Legacy tokens, which upstream's
// tokens controller still writes into Secrets of type
// kubernetes.io/service-account-token that users create, authenticate
// while their Secret and account exist and the Secret holds them.
//
// Only the control plane imports this package.
package satoken

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	tokenunion "k8s.io/apiserver/pkg/authentication/token/union"
	typedv1core "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/serviceaccount"
)

// DefaultIssuer is kubeadm's and most distributions' issuer (and API
// audience): the API server's in-cluster name.
const DefaultIssuer = "https://kubernetes.default.svc.cluster.local"

// Getter reads the objects a token names; upstream's interface.
type Getter = serviceaccount.ServiceAccountTokenGetter

// Generator signs tokens; upstream's interface.
type Generator = serviceaccount.TokenGenerator

// Config configures New.
type Config struct {
	// Issuer is the iss claim and the discovery documents' issuer
	// (default DefaultIssuer); it must be an https URL.
	Issuer string
	// Key signs the tokens; its public half verifies them.
	Key *rsa.PrivateKey
	// Audiences are the API server's own (upstream's --api-audiences):
	// the default audience of a token request, and what a token must be
	// for to authenticate to the API server (default: the issuer).
	Audiences []string
	// Getter reads service accounts, pods, secrets and nodes when a token
	// is validated.
	Getter Getter
	// Secrets, when set, makes legacy tokens (issuer
	// kubernetes/serviceaccount, kept in Secrets of type
	// kubernetes.io/service-account-token) authenticate while their Secret
	// holds them; upstream's validator labels the Secret with the day of
	// last use through it.
	Secrets typedv1core.SecretsGetter
}

// Issuer issues tokens and authenticates requests that carry them.
type Issuer struct {
	cfg  Config
	gen  serviceaccount.TokenGenerator
	auth authenticator.Token
	oidc serviceaccount.OpenIDMetadataProvider
}

// New builds an Issuer.
func New(cfg Config) (*Issuer, error) {
	if cfg.Key == nil || cfg.Getter == nil {
		return nil, errors.New("satoken: Key and Getter are required")
	}
	if cfg.Issuer == "" {
		cfg.Issuer = DefaultIssuer
	}
	if len(cfg.Audiences) == 0 {
		cfg.Audiences = []string{cfg.Issuer}
	}
	gen, err := serviceaccount.JWTTokenGenerator(cfg.Issuer, cfg.Key)
	if err != nil {
		return nil, fmt.Errorf("satoken: token generator: %w", err)
	}
	keys, err := serviceaccount.StaticPublicKeysGetter([]interface{}{&cfg.Key.PublicKey})
	if err != nil {
		return nil, fmt.Errorf("satoken: public keys: %w", err)
	}
	oidc, err := serviceaccount.NewOpenIDMetadataProvider(cfg.Issuer, cfg.Issuer+JWKSPath, "", keys)
	if err != nil {
		return nil, fmt.Errorf("satoken: discovery documents: %w", err)
	}
	auth := serviceaccount.JWTTokenAuthenticator([]string{cfg.Issuer}, keys, authenticator.Audiences(cfg.Audiences),
		serviceaccount.NewValidator(cfg.Getter))
	if cfg.Secrets != nil {
		legacy, err := serviceaccount.NewLegacyValidator(true, cfg.Getter, cfg.Secrets)
		if err != nil {
			return nil, fmt.Errorf("satoken: legacy tokens: %w", err)
		}
		auth = tokenunion.New(auth, serviceaccount.JWTTokenAuthenticator([]string{serviceaccount.LegacyIssuer}, keys,
			authenticator.Audiences(cfg.Audiences), legacy))
	}
	return &Issuer{cfg: cfg, gen: gen, auth: auth, oidc: oidc}, nil
}

// LegacyGenerator signs the legacy tokens that upstream's tokens
// controller puts into Secrets of type kubernetes.io/service-account-token
// (issuer kubernetes/serviceaccount, no expiry), with the same key.
func LegacyGenerator(key *rsa.PrivateKey) (Generator, error) {
	gen, err := serviceaccount.JWTTokenGenerator(serviceaccount.LegacyIssuer, key)
	if err != nil {
		return nil, fmt.Errorf("satoken: legacy token generator: %w", err)
	}
	return gen, nil
}

// The discovery paths, as upstream serves them.
const (
	OpenIDConfigPath = "/.well-known/openid-configuration"
	JWKSPath         = "/openid/v1/jwks"
)

// Audiences are the API server's audiences.
func (i *Issuer) Audiences() []string { return i.cfg.Audiences }

// Issue signs a token for sa, valid for expirationSeconds, for audiences,
// bound to at most one of boundPod, boundSecret and boundNode (a node may
// accompany a pod: the node it runs on, recorded as upstream does).
func (i *Issuer) Issue(ctx context.Context, sa *corev1.ServiceAccount, boundPod *corev1.Pod, boundSecret *corev1.Secret,
	boundNode *corev1.Node, expirationSeconds int64, audiences []string) (string, time.Time, error) {
	var pod *core.Pod
	var secret *core.Secret
	var node *core.Node
	// Claims reads names, namespaces and uids only.
	if boundPod != nil {
		pod = &core.Pod{ObjectMeta: boundPod.ObjectMeta}
	}
	if boundSecret != nil {
		secret = &core.Secret{ObjectMeta: boundSecret.ObjectMeta}
	}
	if boundNode != nil {
		node = &core.Node{ObjectMeta: boundNode.ObjectMeta}
	}
	claims, private, err := serviceaccount.Claims(core.ServiceAccount{ObjectMeta: sa.ObjectMeta}, pod, secret, node,
		nil, nil, expirationSeconds, 0, audiences, nil)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("claims for %s/%s: %w", sa.Namespace, sa.Name, err)
	}
	token, err := i.gen.GenerateToken(ctx, claims, private)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("sign a token for %s/%s: %w", sa.Namespace, sa.Name, err)
	}
	return token, claims.Expiry.Time(), nil
}

// AuthenticateToken implements authenticator.Token: a valid token of
// this issuer, for the API server's audiences, whose account (and bound
// object) still exists with the same uid, is the service account's user.
func (i *Issuer) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	return i.auth.AuthenticateToken(ctx, token)
}

// OpenIDConfiguration and JWKS are the discovery documents.
func (i *Issuer) OpenIDConfiguration() []byte {
	b, _ := i.oidc.GetConfigJSON()
	return b
}

func (i *Issuer) JWKS() []byte {
	b, _ := i.oidc.GetKeysetJSON()
	return b
}

// LoadOrCreateKey reads the RSA key at path (PKCS#1 or PKCS#8 PEM) or, if
// there is none, makes a 2048-bit one and writes it there (mode 0600), as
// kubeadm's sa.key.
func LoadOrCreateKey(path string) (*rsa.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err == nil {
		return parseKey(path, data)
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read service account key: %w", err)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("generate service account key: %w", err)
	}
	block := &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(block), 0o600); err != nil {
		return nil, fmt.Errorf("write service account key: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("write service account key: %w", err)
	}
	return key, nil
}

func parseKey(path string, data []byte) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("service account key %s: no PEM block", path)
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("service account key %s: %w", path, err)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("service account key %s: %T, want RSA", path, k)
	}
	return rk, nil
}
