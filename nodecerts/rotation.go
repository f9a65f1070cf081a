package nodecerts

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/certificate"
	"k8s.io/client-go/util/connrotation"
)

// rotationCheck is how often the API client looks for a new certificate
// (upstream kubelet's period).
const rotationCheck = 10 * time.Second

// ClientRotation keeps the node's client certificate fresh, as upstream
// kubelet with --rotate-certificates: client-go's certificate Manager asks
// for a new one (same subject, signer kube-apiserver-client-kubelet) at
// 70 to 90% of the current one's life and stores it in the certificate
// directory, and the API client made from RESTConfig presents whichever
// certificate is current, closing its connections when it changes so
// that the next requests handshake with the new one. Nothing restarts.
type ClientRotation struct {
	cfg     Config
	manager certificate.Manager
	dialer  *connrotation.Dialer
	rest    *rest.Config
}

// NewClientRotation builds the rotation from the node's kubeconfig as
// loaded (rc): its server and CA, and its certificate, which is the
// starting one when the certificate directory holds none (a kubeconfig
// not written by bootstrapping).
func NewClientRotation(cfg Config, rc *rest.Config) (*ClientRotation, error) {
	cfg.defaults()
	r := &ClientRotation{cfg: cfg}
	store, err := certificate.NewFileStore(clientPair, cfg.CertDir, cfg.CertDir, rc.CertFile, rc.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("client certificate store %s: %w", cfg.CertDir, err)
	}
	subject := nodeSubject(cfg.NodeName)
	r.manager, err = certificate.NewManager(&certificate.Config{
		ClientsetFn: r.clientset,
		Template:    &x509.CertificateRequest{Subject: subject},
		SignerName:  certificatesv1.KubeAPIServerClientKubeletSignerName,
		GetUsages:   certificate.DefaultKubeletClientGetUsages,
		// A kubeconfig with the certificate inline (not ours) starts the
		// store, and is rotated out at once, as upstream.
		BootstrapCertificatePEM: rc.CertData,
		BootstrapKeyPEM:         rc.KeyData,
		CertificateStore:        store,
		Name:                    "client certificate",
	})
	if err != nil {
		return nil, fmt.Errorf("client certificate manager: %w", err)
	}
	if r.rest, r.dialer, err = dynamicClientConfig(rc, r.manager.Current); err != nil {
		return nil, err
	}
	return r, nil
}

// RESTConfig is the node's API client configuration: it presents the
// current certificate.
func (r *ClientRotation) RESTConfig() *rest.Config { return rest.CopyConfig(r.rest) }

// Current is the client certificate in use, nil if none is valid.
func (r *ClientRotation) Current() *tls.Certificate { return r.manager.Current() }

// Run rotates until ctx ends.
func (r *ClientRotation) Run(ctx context.Context) error {
	follow(ctx, r.manager, func(last, cur *tls.Certificate) {
		switch {
		case cur == nil:
			// Expired or gone: the manager asks with the bootstrap
			// credentials, if any (clientset).
			r.cfg.Log.Error("the client certificate expired before it was renewed; waiting for a new one")
		default:
			r.cfg.Log.Info("client certificate rotated; reconnecting with it", "notAfter", cur.Leaf.NotAfter)
			r.dialer.CloseAll()
		}
	})
	return nil
}

// follow runs m until ctx ends and calls changed, every rotationCheck,
// when m's current certificate is another than last time (nil when none
// is valid any more).
func follow(ctx context.Context, m certificate.Manager, changed func(last, cur *tls.Certificate)) {
	m.Start()
	defer m.Stop()
	last := m.Current()
	tick := time.NewTicker(rotationCheck)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if cur := m.Current(); cur != last {
			changed(last, cur)
			last = cur
		}
	}
}

// clientset is the manager's client for its requests: the node's own
// while its certificate is valid, else (expired while the node was down)
// the bootstrap kubeconfig's, as upstream.
func (r *ClientRotation) clientset(current *tls.Certificate) (kubernetes.Interface, error) {
	if current == nil && r.cfg.BootstrapKubeconfig != "" {
		boot, err := LoadRESTConfig(r.cfg.BootstrapKubeconfig)
		if err != nil {
			return nil, err
		}
		return kubernetes.NewForConfig(boot)
	}
	return kubernetes.NewForConfig(r.rest)
}

// dynamicClientConfig is rc without its credentials, on a transport of
// its own whose TLS client certificate is current() at each handshake and
// whose connections the returned dialer can close (upstream kubelet's
// UpdateTransport). The TLS settings move into the transport, since
// client-go refuses a Transport beside them.
func dynamicClientConfig(rc *rest.Config, current func() *tls.Certificate) (*rest.Config, *connrotation.Dialer, error) {
	out := rest.AnonymousClientConfig(rc)
	tlsConfig, err := rest.TLSConfigFor(out)
	if err != nil {
		return nil, nil, fmt.Errorf("TLS configuration of %s: %w", rc.Host, err)
	}
	if tlsConfig == nil {
		tlsConfig = &tls.Config{}
	}
	tlsConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if c := current(); c != nil {
			return c, nil
		}
		return &tls.Certificate{}, nil // none: the server answers 401
	}
	d := connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
	out.Transport = utilnet.SetTransportDefaults(&http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig:     tlsConfig,
		MaxIdleConnsPerHost: 25,
		DialContext:         d.DialContext,
	})
	out.TLSClientConfig = rest.TLSClientConfig{}
	return out, d, nil
}
