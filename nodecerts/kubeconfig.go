package nodecerts

import (
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"
)

// The names upstream's kubelet and kubeadm give the parts of the
// kubeconfigs they write; operators' tooling greps for them.
const (
	clusterName    = "default-cluster"
	contextName    = "default-context"
	certAuthName   = "default-auth"
	tokenAuthName  = "tls-bootstrap-token-user"
	kubeconfigMode = 0o600
)

// BootstrapKubeconfig is the kubeconfig a node bootstraps with: the API
// server, the CA that signs its certificate, and the bootstrap token,
// which may do no more than ask for a client certificate.
func BootstrapKubeconfig(server string, caData []byte, token string) clientcmdapi.Config {
	return clientcmdapi.Config{
		Clusters:  map[string]*clientcmdapi.Cluster{clusterName: {Server: server, CertificateAuthorityData: caData}},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{tokenAuthName: {Token: token}},
		Contexts: map[string]*clientcmdapi.Context{
			contextName: {Cluster: clusterName, AuthInfo: tokenAuthName},
		},
		CurrentContext: contextName,
	}
}

// certKubeconfig is the node's kubeconfig after bootstrapping, as
// upstream's kubelet writes it: the bootstrap kubeconfig's cluster and the
// pair file in the certificate directory as both certificate and key, so
// that a rotation (which moves the file's symlink) needs no rewrite.
func certKubeconfig(from *rest.Config, pemPath string) clientcmdapi.Config {
	cluster := &clientcmdapi.Cluster{Server: from.Host, InsecureSkipTLSVerify: from.Insecure}
	if from.CAFile != "" {
		cluster.CertificateAuthority = from.CAFile
	} else {
		cluster.CertificateAuthorityData = from.CAData
	}
	return clientcmdapi.Config{
		Clusters:  map[string]*clientcmdapi.Cluster{clusterName: cluster},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{certAuthName: {ClientCertificate: pemPath, ClientKey: pemPath}},
		Contexts: map[string]*clientcmdapi.Context{
			contextName: {Cluster: clusterName, AuthInfo: certAuthName, Namespace: "default"},
		},
		CurrentContext: contextName,
	}
}

// WriteKubeconfig writes cfg to path with mode 0600 (it holds
// credentials), through a temporary file renamed over path, so that a
// crash never leaves half a kubeconfig and an existing file of looser
// mode is replaced rather than rewritten in place.
func WriteKubeconfig(path string, cfg clientcmdapi.Config) error {
	data, err := clientcmd.Write(cfg)
	if err != nil {
		return fmt.Errorf("encode kubeconfig %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // gone after the rename; cleans up a failure
	if err := tmp.Chmod(kubeconfigMode); err != nil {
		tmp.Close()
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

// LoadRESTConfig reads a kubeconfig's current context as a rest.Config.
func LoadRESTConfig(path string) (*rest.Config, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", path, err)
	}
	return rc, nil
}

// clientCertValid tells whether the kubeconfig at path exists and holds a
// client certificate that has not expired at now, as upstream kubelet's
// isClientConfigStillValid: a missing file, or one that does not parse or
// names no certificate, is not valid (and is bootstrapped over); only a
// file that cannot be read at all is an error.
func clientCertValid(path string, now time.Time) (bool, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("read kubeconfig %s: %w", path, err)
	}
	rc, err := LoadRESTConfig(path)
	if err != nil {
		return false, nil
	}
	data := rc.CertData
	if len(data) == 0 && rc.CertFile != "" {
		if data, err = os.ReadFile(rc.CertFile); err != nil {
			return false, nil
		}
	}
	certs, err := certutil.ParseCertsPEM(data)
	if err != nil {
		return false, nil
	}
	return certsValid(certs, now), nil
}

// certsValid: no certificate of the chain has expired at now. As
// upstream, a NotBefore in the future is not checked: the signer backdates
// certificates, and a node whose clock lags would otherwise bootstrap anew
// at every start.
func certsValid(certs []*x509.Certificate, now time.Time) bool {
	if len(certs) == 0 {
		return false
	}
	for _, c := range certs {
		if now.After(c.NotAfter) {
			return false
		}
	}
	return true
}
