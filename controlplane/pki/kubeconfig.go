package pki

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clientcmdlatest "k8s.io/client-go/tools/clientcmd/api/latest"
)

// Names used inside every kubeconfig this package writes.
const (
	KubeconfigCluster = "nodelet"
	KubeconfigContext = "nodelet"
)

const (
	adminUser  = "admin"
	adminGroup = "system:masters"
)

// Kubeconfig returns a kubeconfig (YAML) for server with a freshly signed
// client certificate for user and groups, valid for one year (capped at
// the CA's expiry). CA, certificate and key are embedded.
func (b *Bundle) Kubeconfig(server, user string, groups []string) ([]byte, error) {
	return b.kubeconfig(server, user, groups, time.Now())
}

func (b *Bundle) kubeconfig(server, user string, groups []string, now time.Time) ([]byte, error) {
	if server == "" {
		return nil, fmt.Errorf("kubeconfig for %q: server is required", user)
	}
	certPEM, keyPEM, err := b.signClientCert(user, groups, clientValidity, now)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig for %q: %w", user, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[KubeconfigCluster] = &clientcmdapi.Cluster{
		Server:                   server,
		CertificateAuthorityData: b.CAPEM(),
	}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{
		ClientCertificateData: certPEM,
		ClientKeyData:         keyPEM,
	}
	cfg.Contexts[KubeconfigContext] = &clientcmdapi.Context{
		Cluster:  KubeconfigCluster,
		AuthInfo: user,
	}
	cfg.CurrentContext = KubeconfigContext
	data, err := runtime.Encode(clientcmdlatest.Codec, cfg)
	if err != nil {
		return nil, fmt.Errorf("encode kubeconfig for %q: %w", user, err)
	}
	return data, nil
}

// ensureAdminKubeconfig (re)writes admin.kubeconfig when it is missing,
// unreadable, points at another server, embeds another CA, or its client
// certificate is stale.
func (b *Bundle) ensureAdminKubeconfig(server string, now time.Time) error {
	reason, err := b.adminKubeconfigStale(server, now)
	if err != nil {
		return err
	}
	if reason == "" {
		return nil
	}
	data, err := b.kubeconfig(server, adminUser, []string{adminGroup}, now)
	if err != nil {
		return err
	}
	return writeFileAtomic(b.AdminKubeconfigFile, data, 0o600)
}

// adminKubeconfigStale returns why admin.kubeconfig must be rewritten, or
// "" if it is current. Only a read error other than not-exist is returned
// as an error; a corrupt file is simply rewritten.
func (b *Bundle) adminKubeconfigStale(server string, now time.Time) (string, error) {
	data, err := os.ReadFile(b.AdminKubeconfigFile)
	if errors.Is(err, os.ErrNotExist) {
		return "missing", nil
	}
	if err != nil {
		return "", fmt.Errorf("read %s: %w", b.AdminKubeconfigFile, err)
	}
	cfg, err := decodeKubeconfig(data)
	if err != nil {
		return "unparsable", nil
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil {
		return "no current context", nil
	}
	cluster, user := cfg.Clusters[ctx.Cluster], cfg.AuthInfos[ctx.AuthInfo]
	if cluster == nil || user == nil {
		return "incomplete context", nil
	}
	if cluster.Server != server {
		return "server changed", nil
	}
	if !bytes.Equal(cluster.CertificateAuthorityData, b.caPEM) {
		return "CA changed", nil
	}
	cert, err := parseCert(user.ClientCertificateData)
	if err != nil {
		return "unparsable client certificate", nil
	}
	return b.leafStale(cert, now), nil
}

// decodeKubeconfig is clientcmd.Load without importing clientcmd, whose
// flag helpers pull github.com/spf13/pflag into the module graph.
// kubeconfig above likewise encodes exactly as clientcmd.Write does.
func decodeKubeconfig(data []byte) (*clientcmdapi.Config, error) {
	gvk := &schema.GroupVersionKind{Version: clientcmdlatest.Version, Kind: "Config"}
	obj, _, err := clientcmdlatest.Codec.Decode(data, gvk, clientcmdapi.NewConfig())
	if err != nil {
		return nil, err
	}
	cfg, ok := obj.(*clientcmdapi.Config)
	if !ok {
		return nil, fmt.Errorf("decoded kubeconfig has type %T", obj)
	}
	return cfg, nil
}

// ServedURL is the server of the admin kubeconfig, which the control plane
// rewrites at every start to the URL it serves on: the right default for
// kubeconfigs made for this machine. ErrNotExist (wrapped) before the
// control plane's first start.
func (b *Bundle) ServedURL() (string, error) {
	data, err := os.ReadFile(b.AdminKubeconfigFile)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", b.AdminKubeconfigFile, err)
	}
	cfg, err := decodeKubeconfig(data)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", b.AdminKubeconfigFile, err)
	}
	if ctx := cfg.Contexts[cfg.CurrentContext]; ctx != nil && cfg.Clusters[ctx.Cluster] != nil {
		return cfg.Clusters[ctx.Cluster].Server, nil
	}
	return "", fmt.Errorf("%s names no server", b.AdminKubeconfigFile)
}
