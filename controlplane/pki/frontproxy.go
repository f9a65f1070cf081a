package pki

import (
	"crypto/tls"
	"fmt"
	"path/filepath"
	"time"
)

// The front proxy: the API server proxies requests for aggregated APIs to
// extension API servers and tells them who the caller is in request
// headers (X-Remote-User, X-Remote-Group, X-Remote-Extra-*). Extension
// servers believe those headers only from a client certificate signed by
// the request-header CA and named in requestheader-allowed-names, which
// they read from the extension-apiserver-authentication ConfigMap. That
// CA is a CA of its own, as upstream's front-proxy-ca: a certificate of
// the cluster CA (every node and admin has one) must not be able to
// speak for other users through those headers.
const (
	FrontProxyCACertName = "front-proxy-ca.crt"
	FrontProxyCAKeyName  = "front-proxy-ca.key"
	// FrontProxyUser is the common name of the API server's front-proxy
	// client certificate, the one allowed name.
	FrontProxyUser = "front-proxy-client"
)

// FrontProxy is what the API server needs to proxy to extension servers.
type FrontProxy struct {
	// CAPEM is the request-header CA, published for extension servers.
	CAPEM []byte
	// Client is the API server's client certificate (CN FrontProxyUser).
	Client tls.Certificate
	// CertPEM and KeyPEM are Client in PEM form.
	CertPEM, KeyPEM []byte
}

// FrontProxy creates the front-proxy CA in the bundle's directory if it is
// missing (reusing it otherwise) and issues a fresh client certificate
// from it, valid as long as that CA: it lives in memory only, a new one
// at every start (see InProcess).
func (b *Bundle) FrontProxy() (*FrontProxy, error) {
	return b.frontProxy(time.Now())
}

func (b *Bundle) frontProxy(now time.Time) (*FrontProxy, error) {
	ca, err := ensureCAFiles(filepath.Join(b.Dir, FrontProxyCACertName), filepath.Join(b.Dir, FrontProxyCAKeyName),
		"nodelet-front-proxy-ca", now)
	if err != nil {
		return nil, fmt.Errorf("front-proxy CA: %w", err)
	}
	signer := &Bundle{CACert: ca.cert, CAKey: ca.key}
	certPEM, keyPEM, err := signer.signClientCert(FrontProxyUser, nil, InProcess, now)
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("front-proxy client certificate: %w", err)
	}
	return &FrontProxy{CAPEM: ca.pem, Client: pair, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}
