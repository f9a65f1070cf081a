package nodecerts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/cluster-bootstrap/token/jws"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
)

// Kubeadm's discovery defaults.
const (
	DefaultDiscoveryTimeout = 5 * time.Minute
	discoveryRetryInterval  = 5 * time.Second
)

// Discovery finds and authenticates a control plane from a bootstrap
// token, as kubeadm join's token discovery: the cluster-info ConfigMap of
// kube-public is read anonymously without verifying the server; its
// kubeconfig must carry a JWS signature made with the token (only a server
// that knows the token can make it), and the CA in it must hash to one of
// the pins; then it is read again over TLS verified with that CA and must
// be the same.
type Discovery struct {
	// Server is the API server, https://HOST:PORT or HOST:PORT.
	Server string
	// Token is the bootstrap token, ID.SECRET.
	Token string
	// CACertHashes pin the cluster CA: sha256:HEX of a CA certificate's
	// SubjectPublicKeyInfo (kubeadm's --discovery-token-ca-cert-hash, the
	// second line of `controlplane token create`). One is required unless
	// UnsafeSkipCAVerification.
	CACertHashes []string
	// UnsafeSkipCAVerification trusts whatever CA a server that knows the
	// token presents (kubeadm's
	// --discovery-token-unsafe-skip-ca-verification).
	UnsafeSkipCAVerification bool
	// Timeout bounds the wait for cluster-info and the token's signature
	// in it, which the control plane adds shortly after the token is made
	// (default DefaultDiscoveryTimeout). RetryInterval: default 5s.
	Timeout, RetryInterval time.Duration
	Log                    *slog.Logger
}

// Run discovers the control plane and returns the bootstrap kubeconfig:
// cluster-info's server and CA, and the token.
func (d Discovery) Run(ctx context.Context) (*clientcmdapi.Config, error) {
	id, secret, err := parseToken(d.Token)
	if err != nil {
		return nil, err
	}
	pins, err := parsePins(d.CACertHashes)
	if err != nil {
		return nil, err
	}
	if len(pins) == 0 && !d.UnsafeSkipCAVerification {
		return nil, errors.New("discovery: a CA certificate hash is required to trust the control plane " +
			"(--discovery-token-ca-cert-hash sha256:..., printed by `controlplane token create`), " +
			"or --discovery-token-unsafe-skip-ca-verification")
	}
	server, err := serverURL(d.Server)
	if err != nil {
		return nil, err
	}
	d.defaults()
	insecure := &rest.Config{Host: server, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	cm, err := d.clusterInfo(ctx, insecure, id)
	if err != nil {
		return nil, err
	}
	content, err := verifySignature(cm, id, secret)
	if err != nil {
		return nil, err
	}
	cluster, err := clusterOf(content)
	if err != nil {
		return nil, err
	}
	if len(pins) == 0 {
		// Kubeadm's --discovery-token-unsafe-skip-ca-verification: the
		// signature is all the trust there is.
		d.Log.Warn("discovery: the cluster CA is not verified (--discovery-token-unsafe-skip-ca-verification)", "server", server)
		cfg := BootstrapKubeconfig(cluster.Server, cluster.CertificateAuthorityData, d.Token)
		return &cfg, nil
	}
	if err := checkPins(cluster.CertificateAuthorityData, pins, server); err != nil {
		return nil, err
	}
	// Read it again over a verified connection: the first answer proved
	// the server knows the token; this one that it holds the CA's key.
	secure := &rest.Config{Host: server, TLSClientConfig: rest.TLSClientConfig{CAData: cluster.CertificateAuthorityData}}
	again, err := d.clusterInfo(ctx, secure, id)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal([]byte(again.Data[bootstrapapi.KubeConfigKey]), content) {
		return nil, fmt.Errorf("discovery: the %s ConfigMap read over TLS verified with its CA differs from the one read before", bootstrapapi.ConfigMapClusterInfo)
	}
	d.Log.Info("discovery: control plane verified", "server", cluster.Server, "caHash", hashesOf(cluster.CertificateAuthorityData))
	cfg := BootstrapKubeconfig(cluster.Server, cluster.CertificateAuthorityData, d.Token)
	return &cfg, nil
}

func (d *Discovery) defaults() {
	if d.Timeout <= 0 {
		d.Timeout = DefaultDiscoveryTimeout
	}
	if d.RetryInterval <= 0 {
		d.RetryInterval = discoveryRetryInterval
	}
	d.RetryInterval = min(d.RetryInterval, d.Timeout)
	if d.Log == nil {
		d.Log = slog.Default()
	}
}

// clusterInfo reads cluster-info anonymously, retrying until it holds a
// signature for the token id or Timeout passes; the last failure is the
// error.
func (d Discovery) clusterInfo(ctx context.Context, rc *rest.Config, id string) (*corev1.ConfigMap, error) {
	rc.Timeout = d.RetryInterval + 5*time.Second
	rc.QPS = -1 // the poll paces the reads
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("discovery: client of %s: %w", rc.Host, err)
	}
	var cm *corev1.ConfigMap
	var last error
	poll := func(ctx context.Context) (bool, error) {
		got, err := client.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, bootstrapapi.ConfigMapClusterInfo, metav1.GetOptions{})
		switch {
		case ctx.Err() != nil:
			return false, nil // the deadline: keep the last answer as the error
		case err != nil:
			last = fmt.Errorf("discovery: read ConfigMap %s/%s from %s: %w", metav1.NamespacePublic, bootstrapapi.ConfigMapClusterInfo, rc.Host, err)
		case got.Data[bootstrapapi.JWSSignatureKeyPrefix+id] == "":
			last = fmt.Errorf("discovery: token id %q is unknown to %s or has expired: the %s ConfigMap holds no signature for it (make one with `controlplane token create`)",
				id, rc.Host, bootstrapapi.ConfigMapClusterInfo)
		default:
			cm = got
			return true, nil
		}
		d.Log.Info("discovery: retrying", "err", last)
		return false, nil
	}
	if err := wait.PollUntilContextTimeout(ctx, d.RetryInterval, d.Timeout, true, poll); err != nil {
		if last == nil || ctx.Err() != nil {
			last = fmt.Errorf("discovery: read %s from %s: %w", bootstrapapi.ConfigMapClusterInfo, rc.Host, err)
		}
		return nil, last
	}
	return cm, nil
}

// verifySignature checks the token's detached JWS signature of the
// ConfigMap's kubeconfig and returns the kubeconfig.
func verifySignature(cm *corev1.ConfigMap, id, secret string) ([]byte, error) {
	content := cm.Data[bootstrapapi.KubeConfigKey]
	if content == "" {
		return nil, fmt.Errorf("discovery: the %s ConfigMap has no %q key: the control plane is not set up for token bootstrapping",
			bootstrapapi.ConfigMapClusterInfo, bootstrapapi.KubeConfigKey)
	}
	sig := cm.Data[bootstrapapi.JWSSignatureKeyPrefix+id]
	if !jws.DetachedTokenIsValid(sig, content, id, secret) {
		return nil, fmt.Errorf("discovery: the %s ConfigMap's signature for token id %q does not verify with the token's secret: "+
			"the token is wrong, or this server does not know it; refusing to trust it", bootstrapapi.ConfigMapClusterInfo, id)
	}
	return []byte(content), nil
}

// clusterOf is the cluster of cluster-info's kubeconfig: its current
// context's, else its only one.
func clusterOf(content []byte) (*clientcmdapi.Cluster, error) {
	cfg, err := clientcmd.Load(content)
	if err != nil {
		return nil, fmt.Errorf("discovery: parse the kubeconfig of %s: %w", bootstrapapi.ConfigMapClusterInfo, err)
	}
	var cluster *clientcmdapi.Cluster
	if ctx := cfg.Contexts[cfg.CurrentContext]; ctx != nil {
		cluster = cfg.Clusters[ctx.Cluster]
	} else if len(cfg.Clusters) == 1 {
		for _, c := range cfg.Clusters {
			cluster = c
		}
	}
	if cluster == nil || cluster.Server == "" || len(cluster.CertificateAuthorityData) == 0 {
		return nil, fmt.Errorf("discovery: the kubeconfig of %s names no cluster with a server and a CA", bootstrapapi.ConfigMapClusterInfo)
	}
	return cluster, nil
}

// CAHash is kubeadm's pin of a CA certificate: sha256: and the hex SHA-256
// of its SubjectPublicKeyInfo (DER).
func CAHash(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// parsePins reads "sha256:HEX" pins into a set of lower-case hex digests.
func parsePins(hashes []string) (map[string]bool, error) {
	pins := map[string]bool{}
	for _, h := range hashes {
		format, value, ok := strings.Cut(strings.TrimSpace(h), ":")
		if !ok || !strings.EqualFold(format, "sha256") {
			return nil, fmt.Errorf("discovery: CA certificate hash %q is not sha256:HEX", h)
		}
		if b, err := hex.DecodeString(value); err != nil || len(b) != sha256.Size {
			return nil, fmt.Errorf("discovery: CA certificate hash %q: want %d bytes of hex after sha256:", h, sha256.Size)
		}
		pins[strings.ToLower(value)] = true
	}
	return pins, nil
}

// checkPins accepts the CA bundle if one of its certificates hashes to a
// pin, and otherwise names what it got and what was pinned.
func checkPins(caPEM []byte, pins map[string]bool, server string) error {
	certs, err := certutil.ParseCertsPEM(caPEM)
	if err != nil {
		return fmt.Errorf("discovery: parse the CA of %s: %w", bootstrapapi.ConfigMapClusterInfo, err)
	}
	var got []string
	for _, c := range certs {
		h := CAHash(c)
		if pins[strings.TrimPrefix(h, "sha256:")] {
			return nil
		}
		got = append(got, h)
	}
	want := make([]string, 0, len(pins))
	for p := range pins {
		want = append(want, "sha256:"+p)
	}
	return fmt.Errorf("discovery: the control plane at %s has a CA of hash %s, not the pinned %s: refusing it",
		server, strings.Join(got, ", "), strings.Join(want, ", "))
}

// hashesOf names the pins of a CA bundle, for the log.
func hashesOf(caPEM []byte) string {
	certs, _ := certutil.ParseCertsPEM(caPEM)
	out := make([]string, 0, len(certs))
	for _, c := range certs {
		out = append(out, CAHash(c))
	}
	return strings.Join(out, ",")
}

// parseToken splits ID.SECRET, checking its form without printing the
// secret.
func parseToken(token string) (id, secret string, err error) {
	if !bootstraputil.IsValidBootstrapToken(token) {
		return "", "", errors.New("discovery: the token is not a bootstrap token of the form [a-z0-9]{6}.[a-z0-9]{16}")
	}
	id, secret, _ = strings.Cut(token, ".")
	return id, secret, nil
}

// serverURL accepts HOST:PORT (kubeadm's form) or an https URL.
func serverURL(s string) (string, error) {
	switch {
	case s == "":
		return "", errors.New("discovery: the API server is required (--server)")
	case strings.HasPrefix(s, "https://"):
		return s, nil
	case strings.Contains(s, "://"):
		return "", fmt.Errorf("discovery: server %q: only https is supported", s)
	}
	return "https://" + s, nil
}
