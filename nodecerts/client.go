// Package nodecerts holds the node's credentials, as upstream's kubelet
// and kubeadm get them: discovery of the control plane from a bootstrap
// token (discovery.go), the client certificate asked for with the
// bootstrap kubeconfig and written under the certificate directory
// (client.go), its rotation before expiry with the API client following
// it (rotation.go), and the serving certificate of the node's HTTPS API
// (serving.go). Certificates are asked for with CertificateSigningRequests
// the control plane approves and signs; the file names and layout are
// upstream kubelet's.
package nodecerts

import (
	"context"
	"crypto"
	"crypto/sha512"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/keyutil"
)

// Upstream kubelet's names in the certificate directory.
const (
	clientPair = "kubelet-client" // kubelet-client-current.pem
	serverPair = "kubelet-server" // kubelet-server-current.pem
	// pendingKey keeps the key of a request not yet answered, so that a
	// restart asks again with the same key (and finds the same request).
	pendingKey = "kubelet-client.key.tmp"
	// certificateWait is how long a bootstrapping node waits for its
	// request to be approved and signed (upstream's hour).
	certificateWait = time.Hour
	// serverWait is how long the request may fail for reasons other than
	// being refused (the API server starting) before bootstrapping fails.
	serverWait = time.Minute
)

// Config says where the node's credentials are: upstream kubelet's
// --kubeconfig, --bootstrap-kubeconfig and --cert-dir.
type Config struct {
	NodeName string
	// Kubeconfig is the node's kubeconfig. Bootstrapping writes it,
	// naming the client certificate's pair file in CertDir.
	Kubeconfig string
	// BootstrapKubeconfig holds credentials that may only ask for a
	// node's client certificate (a bootstrap token); empty: no
	// bootstrapping, Kubeconfig must hold working credentials.
	BootstrapKubeconfig string
	// CertDir holds the certificates and keys (pair files
	// kubelet-client-current.pem and kubelet-server-current.pem, with the
	// timestamped files they link to).
	CertDir string
	Log     *slog.Logger
}

func (c *Config) defaults() {
	if c.Log == nil {
		c.Log = slog.Default()
	}
}

// LoadClientCert makes sure Kubeconfig holds a client certificate of the
// node that has not expired, as upstream kubelet's LoadClientCert: if it
// does, nothing is done; else a key is made (or the pending one reused),
// a CertificateSigningRequest for CN=system:node:NAME, O=system:nodes and
// signer kubernetes.io/kube-apiserver-client-kubelet is made with the
// bootstrap credentials, and once the control plane has approved and
// signed it the pair is stored in CertDir and Kubeconfig written to name
// it, with the bootstrap kubeconfig's server and CA.
func LoadClientCert(ctx context.Context, cfg Config) error {
	cfg.defaults()
	if ok, err := clientCertValid(cfg.Kubeconfig, time.Now()); err != nil {
		return err
	} else if ok {
		cfg.Log.Info("kubeconfig holds a valid client certificate; not bootstrapping", "kubeconfig", cfg.Kubeconfig)
		return nil
	}
	if cfg.BootstrapKubeconfig == "" {
		return fmt.Errorf("kubeconfig %s holds no valid client certificate and no bootstrap kubeconfig is given", cfg.Kubeconfig)
	}
	boot, err := LoadRESTConfig(cfg.BootstrapKubeconfig)
	if err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	client, err := kubernetes.NewForConfig(boot)
	if err != nil {
		return fmt.Errorf("bootstrap: client of %s: %w", boot.Host, err)
	}
	return bootstrap(ctx, cfg, client, boot)
}

// bootstrap asks for the certificate with client (the bootstrap
// kubeconfig's, boot) and writes the kubeconfig.
func bootstrap(ctx context.Context, cfg Config, client kubernetes.Interface, boot *rest.Config) error {
	if err := os.MkdirAll(cfg.CertDir, 0o700); err != nil {
		return fmt.Errorf("bootstrap: certificate directory: %w", err)
	}
	store, err := certificate.NewFileStore(clientPair, cfg.CertDir, cfg.CertDir, "", "")
	if err != nil {
		return fmt.Errorf("bootstrap: certificate store %s: %w", cfg.CertDir, err)
	}
	keyPEM, err := clientKey(store, filepath.Join(cfg.CertDir, pendingKey))
	if err != nil {
		return err
	}
	cfg.Log.Info("asking the control plane for a client certificate", "server", boot.Host, "bootstrapKubeconfig", cfg.BootstrapKubeconfig)
	certPEM, err := requestClientCert(ctx, client, keyPEM, cfg.NodeName, cfg.Log)
	if err != nil {
		return err
	}
	if _, err := store.Update(certPEM, keyPEM); err != nil {
		return fmt.Errorf("bootstrap: store the client certificate in %s: %w", cfg.CertDir, err)
	}
	if err := os.Remove(filepath.Join(cfg.CertDir, pendingKey)); err != nil && !errors.Is(err, os.ErrNotExist) {
		cfg.Log.Warn("remove the pending key", "err", err)
	}
	if err := WriteKubeconfig(cfg.Kubeconfig, certKubeconfig(boot, store.CurrentPath())); err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	cfg.Log.Info("client certificate issued", "kubeconfig", cfg.Kubeconfig, "certificate", store.CurrentPath())
	return nil
}

// clientKey is the key to ask with: the stored pair's (an expired
// certificate's key is asked for again), else the pending key, made now
// if there is none and kept until the certificate is stored.
func clientKey(store certificate.FileStore, pending string) ([]byte, error) {
	if cur, err := store.Current(); err == nil && cur.PrivateKey != nil {
		if data, err := keyutil.MarshalPrivateKeyToPEM(cur.PrivateKey); err == nil {
			return data, nil
		}
	}
	data, _, err := keyutil.LoadOrGenerateKeyFile(pending)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: key %s: %w", pending, err)
	}
	return data, nil
}

// requestClientCert asks for the node's client certificate and waits for
// it. The request's name digests the key, subject and usages, so that a
// restart with the same pending key finds its own request again rather
// than making another. A refusal (bad token, no permission, invalid
// request) fails at once; other errors are retried for serverWait.
func requestClientCert(ctx context.Context, client kubernetes.Interface, keyPEM []byte, nodeName string, log *slog.Logger) ([]byte, error) {
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: parse the key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, errors.New("bootstrap: the key cannot sign")
	}
	subject := nodeSubject(nodeName)
	csrPEM, err := certutil.MakeCSR(key, &subject, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: make the certificate request: %w", err)
	}
	usages := certificate.DefaultKubeletClientGetUsages(key)
	name, err := requestName(signer.Public(), subject, usages)
	if err != nil {
		return nil, err
	}
	var reqName string
	var reqUID types.UID
	try := func(ctx context.Context) (bool, error) {
		n, uid, err := csr.RequestCertificateWithContext(ctx, client, csrPEM, name, certificatesv1.KubeAPIServerClientKubeletSignerName, nil, usages, key)
		switch {
		case err == nil:
			reqName, reqUID = n, uid
			return true, nil
		case refused(err):
			return false, fmt.Errorf("bootstrap: certificate signing request %s refused by the API server: %w", name, err)
		}
		log.Info("bootstrap: retrying the certificate signing request", "csr", name, "err", err)
		return false, nil
	}
	if err := wait.PollUntilContextTimeout(ctx, 2*time.Second, serverWait, true, try); err != nil {
		return nil, fmt.Errorf("bootstrap: certificate signing request %s: %w", name, err)
	}
	log.Info("waiting for the client certificate to be approved and issued", "csr", reqName)
	ctx, cancel := context.WithTimeout(ctx, certificateWait)
	defer cancel()
	data, err := csr.WaitForCertificate(ctx, client, reqName, reqUID)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: certificate signing request %s: %w", reqName, err)
	}
	return data, nil
}

// refused are the answers that asking again will not change.
func refused(err error) bool {
	return apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)
}

// nodeSubject is a node's identity in both its certificates.
func nodeSubject(nodeName string) pkix.Name {
	return pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"}}
}

// requestName is node-csr- and a digest of what the request asks for:
// the public key, subject and usages (the encoded request itself differs
// at every signing). Each part is base64url-encoded and followed by a
// byte outside that alphabet, so that no two inputs write the same
// stream.
func requestName(pub crypto.PublicKey, subject pkix.Name, usages []certificatesv1.KeyUsage) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("bootstrap: encode the public key: %w", err)
	}
	h := sha512.New512_256()
	write := func(b []byte) {
		h.Write([]byte(base64.RawURLEncoding.EncodeToString(b)))
		h.Write([]byte{'|'})
	}
	write(der)
	write([]byte(subject.CommonName))
	for _, o := range subject.Organization {
		write([]byte(o))
	}
	for _, u := range usages {
		write([]byte(u))
	}
	return "node-csr-" + base64.RawURLEncoding.EncodeToString(h.Sum(nil)), nil
}
