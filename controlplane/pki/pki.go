// Package pki creates and maintains the control plane's certificate
// authority, the API server's serving certificate and the admin kubeconfig.
//
// Layout of Config.Dir (created 0700, keys 0600, every file written
// atomically):
//
//	ca.crt, ca.key            ECDSA P-256 self-signed CA, CN "nodelet-ca", 10 years
//	serving.crt, serving.key  API server certificate, 1 year
//	admin.kubeconfig          client cert CN "admin", O "system:masters"
//	front-proxy-ca.crt/.key   the request-header CA of aggregated APIs (frontproxy.go)
//
// Ensure is idempotent: the CA and all keys are reused on restart; the
// serving certificate and the admin kubeconfig are reissued only when they
// are missing, expiring, or no longer match the configuration.
package pki

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"
)

// File names inside Config.Dir.
const (
	CACertName          = "ca.crt"
	CAKeyName           = "ca.key"
	ServingCertName     = "serving.crt"
	ServingKeyName      = "serving.key"
	AdminKubeconfigName = "admin.kubeconfig"
)

// DefaultAPIServerURL is used for the admin kubeconfig when
// Config.APIServerURL is empty.
const DefaultAPIServerURL = "https://127.0.0.1:6443"

const (
	caValidity      = 10 * 365 * 24 * time.Hour
	servingValidity = 365 * 24 * time.Hour
	clientValidity  = 365 * 24 * time.Hour
	// renewBefore is how close to expiry a leaf certificate may get before
	// Ensure reissues it.
	renewBefore = 30 * 24 * time.Hour
	// backdate tolerates small clock skew between hosts.
	backdate = time.Hour
	// InProcess is the validity to give credentials that live only in the
	// control plane's memory (its components' and the API server's client
	// certificates, made anew at every start): signing clamps it to the
	// CA's expiry. Whoever could take them from memory could take the CA
	// key from the same process, so a shorter life would add renewals
	// and no safety; the control plane never stops for their expiry.
	InProcess = 100 * 365 * 24 * time.Hour
	// renewCheck is how often Run checks the certificates on disk.
	renewCheck = time.Hour
)

// ErrNoCA is returned (wrapped) by LoadCA when the directory holds no CA.
var ErrNoCA = errors.New("no CA")

// Config says where the PKI lives and what it must cover.
type Config struct {
	// Dir holds every file of the PKI.
	Dir string
	// Hosts are extra subject alternative names for the serving
	// certificate (--tls-san): DNS names or IP addresses.
	Hosts []string
	// APIServerURL is the server written into the admin kubeconfig, for
	// example https://127.0.0.1:6443.
	APIServerURL string
	// Log reports renewals that failed while running (Run).
	Log *slog.Logger
}

// Bundle is a loaded CA plus, when produced by Ensure, the API server's
// serving certificate. Its methods are safe for concurrent use.
type Bundle struct {
	// CACert and CAKey are the cluster CA.
	CACert *x509.Certificate
	CAKey  crypto.Signer

	Dir                 string
	CAFile              string
	ServingCertFile     string
	ServingKeyFile      string
	AdminKubeconfigFile string

	caPEM   []byte
	serving atomic.Pointer[tls.Certificate] // nil for a bundle from LoadCA
	// cfg is what Ensure was given, for Renew.
	cfg Config
}

// Ensure creates whatever is missing or stale in cfg.Dir and returns the
// resulting bundle. See the package comment for the rules.
func Ensure(cfg Config) (*Bundle, error) {
	return ensure(cfg, time.Now())
}

func ensure(cfg Config, now time.Time) (*Bundle, error) {
	if cfg.Dir == "" {
		return nil, errors.New("pki: Config.Dir is required")
	}
	if cfg.APIServerURL == "" {
		cfg.APIServerURL = DefaultAPIServerURL
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("create pki dir %s: %w", cfg.Dir, err)
	}
	b, err := loadOrCreateCA(cfg.Dir, now)
	if err != nil {
		return nil, err
	}
	b.cfg = cfg
	if err := b.renew(now); err != nil {
		return nil, err
	}
	return b, nil
}

// renew reissues the serving certificate and the admin kubeconfig if
// they expire within renewBefore (or no longer match the configuration);
// a new serving certificate is served from the next handshake on.
func (b *Bundle) renew(now time.Time) error {
	if err := b.ensureServing(b.cfg.Hosts, now); err != nil {
		return err
	}
	return b.ensureAdminKubeconfig(b.cfg.APIServerURL, now)
}

// LoadCA loads the CA from dir without creating anything. The returned
// bundle can sign client certificates and kubeconfigs; its TLSConfig has no
// serving certificate.
func LoadCA(dir string) (*Bundle, error) {
	b := newBundle(dir)
	_, errCert := os.Stat(b.CAFile)
	_, errKey := os.Stat(filepath.Join(dir, CAKeyName))
	if errors.Is(errCert, os.ErrNotExist) || errors.Is(errKey, os.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s: start the control plane once first", ErrNoCA, dir)
	}
	if err := b.loadCA(); err != nil {
		return nil, err
	}
	return b, nil
}

func newBundle(dir string) *Bundle {
	return &Bundle{
		Dir:                 dir,
		CAFile:              filepath.Join(dir, CACertName),
		ServingCertFile:     filepath.Join(dir, ServingCertName),
		ServingKeyFile:      filepath.Join(dir, ServingKeyName),
		AdminKubeconfigFile: filepath.Join(dir, AdminKubeconfigName),
	}
}

// loadOrCreateCA reuses an existing CA (see ensureCAFiles).
func loadOrCreateCA(dir string, now time.Time) (*Bundle, error) {
	b := newBundle(dir)
	ca, err := ensureCAFiles(b.CAFile, filepath.Join(dir, CAKeyName), "nodelet-ca", now)
	if err != nil {
		return nil, err
	}
	b.CACert, b.CAKey, b.caPEM = ca.cert, ca.key, ca.pem
	return b, nil
}

func (b *Bundle) loadCA() error {
	ca, err := loadCAFiles(b.CAFile, filepath.Join(b.Dir, CAKeyName))
	if err != nil {
		return err
	}
	b.CACert, b.CAKey, b.caPEM = ca.cert, ca.key, ca.pem
	return nil
}

// authority is a loaded CA: its certificate (parsed and PEM) and key.
type authority struct {
	cert *x509.Certificate
	key  crypto.Signer
	pem  []byte
}

// ensureCAFiles reuses the CA in certPath and keyPath. A missing key
// creates a new CA named cn; a key without its certificate (a crash
// between the two writes) gets a new self-signed certificate; a
// certificate without its key is an error, since silently replacing a CA
// would break every client that trusts it.
func ensureCAFiles(certPath, keyPath, cn string, now time.Time) (*authority, error) {
	key, err := readKey(keyPath)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if _, statErr := os.Stat(certPath); statErr == nil {
			return nil, fmt.Errorf("load CA: %s exists but %s is missing", certPath, keyPath)
		}
		if key, err = newKey(); err != nil {
			return nil, err
		}
		if err := writeKey(keyPath, key); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, err
	}
	if _, err := os.Stat(certPath); errors.Is(err, os.ErrNotExist) {
		der, err := selfSignCA(key, cn, now)
		if err != nil {
			return nil, err
		}
		if err := writeFileAtomic(certPath, encodeCert(der), 0o644); err != nil {
			return nil, err
		}
	}
	return loadCAFiles(certPath, keyPath)
}

func loadCAFiles(certPath, keyPath string) (*authority, error) {
	certPEM, cert, err := readCert(certPath)
	if err != nil {
		return nil, fmt.Errorf("load CA: %w", err)
	}
	key, err := readKey(keyPath)
	if err != nil {
		return nil, fmt.Errorf("load CA: %w", err)
	}
	if !publicKeyMatches(cert, key) {
		return nil, fmt.Errorf("load CA: %s does not match %s", certPath, keyPath)
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("load CA: %s is not a CA certificate", certPath)
	}
	return &authority{cert: cert, key: key, pem: certPEM}, nil
}

// CAPEM returns the CA certificate in PEM form.
func (b *Bundle) CAPEM() []byte {
	return append([]byte(nil), b.caPEM...)
}

// CAPool returns a new pool holding only the cluster CA.
func (b *Bundle) CAPool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(b.CACert)
	return pool
}

// TLSConfig returns the API server's TLS configuration: the serving
// certificate, optional client certificates verified against the CA, TLS
// 1.2 or later, and ALPN for h2 and http/1.1. For a bundle from LoadCA
// the configuration has no certificate and every handshake fails.
func (b *Bundle) TLSConfig() *tls.Config {
	cfg := &tls.Config{
		ClientAuth: tls.VerifyClientCertIfGiven,
		ClientCAs:  b.CAPool(),
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
	}
	if b.serving.Load() != nil {
		// The certificate of each handshake: Renew may replace it.
		cfg.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return b.serving.Load(), nil }
	}
	return cfg
}

// Run keeps the certificates on disk fresh while the control plane runs:
// every hour, the serving certificate and the admin kubeconfig are
// reissued once they are within 30 days of expiring (as Ensure does at
// start), the new serving certificate taking over at the next handshake.
// It returns when ctx ends; a failed renewal is logged and retried.
func (b *Bundle) Run(ctx context.Context) error {
	log := b.cfg.Log
	if log == nil {
		log = slog.Default()
	}
	t := time.NewTicker(renewCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			if err := b.renew(now); err != nil {
				log.Error("renew the control plane's certificates", "component", "pki", "err", err)
			}
		}
	}
}
