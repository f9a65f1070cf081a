package nodelet

import (
	"context"
	"crypto/tls"
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodelet/nodelet/nodecerts"
)

// managed: the control plane issues the node's client certificate, so
// the API client can only be made in Run (connect), after bootstrapping.
func (c Credentials) managed() bool { return c.BootstrapKubeconfig != "" || c.RotateCertificates }

// certs is the nodecerts view of the credentials.
func (a *Agent) certs() nodecerts.Config {
	c := a.cfg.Credentials
	return nodecerts.Config{NodeName: a.cfg.NodeName, Kubeconfig: c.Kubeconfig, BootstrapKubeconfig: c.BootstrapKubeconfig,
		CertDir: c.CertDir, Log: a.log.With("component", "certificates")}
}

// loadKubeconfig reads Kubeconfig with the client's limits and name.
func loadKubeconfig(cfg *Config) (*rest.Config, error) {
	rc, err := nodecerts.LoadRESTConfig(cfg.Credentials.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("nodelet: %w", err)
	}
	if cfg.Credentials.KubeAPIQPS != 0 {
		rc.QPS = cfg.Credentials.KubeAPIQPS
	}
	if cfg.Credentials.KubeAPIBurst != 0 {
		rc.Burst = cfg.Credentials.KubeAPIBurst
	}
	rc.UserAgent = "nodelet/" + cfg.NodeName
	return rc, nil
}

// connect makes the API client New left to Run: it bootstraps the client
// certificate (waiting, as upstream's kubelet, until the control plane
// issues it), loads the kubeconfig and, with RotateCertificates, starts
// the rotation, which runs until stop is called. RestConfig stays the
// kubeconfig as loaded: its server and CA are read elsewhere.
func (a *Agent) connect(ctx context.Context) (stop func(), err error) {
	stop = func() {}
	if a.client != nil {
		return stop, nil
	}
	certs := a.certs()
	if a.cfg.Credentials.BootstrapKubeconfig != "" {
		if err := nodecerts.LoadClientCert(ctx, certs); err != nil {
			return nil, fmt.Errorf("nodelet: %w", err)
		}
	}
	if a.cfg.RestConfig, err = loadKubeconfig(&a.cfg); err != nil {
		return nil, err
	}
	rc := a.cfg.RestConfig
	var rotation *nodecerts.ClientRotation
	if a.cfg.Credentials.RotateCertificates {
		if rotation, err = nodecerts.NewClientRotation(certs, rc); err != nil {
			return nil, fmt.Errorf("nodelet: %w", err)
		}
		rc = rotation.RESTConfig()
		if err := a.metrics.CertificateTTL("client", rotation.Current); err != nil {
			return nil, fmt.Errorf("nodelet: %w", err)
		}
	}
	if a.client, err = kubernetes.NewForConfig(rc); err != nil {
		return nil, fmt.Errorf("nodelet: API client: %w", err)
	}
	if rotation == nil {
		return stop, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); rotation.Run(ctx) }()
	return func() { cancel(); <-done }, nil
}

// issuedServingCert is the serving certificate's manager with
// ServerTLSBootstrap: asked for once the Node reports its addresses,
// which the approver checks the request against.
func (a *Agent) issuedServingCert(w *wired) (func(*tls.ClientHelloInfo) (*tls.Certificate, error), error) {
	s, err := nodecerts.NewServing(a.certs(), a.client, w.node.Addresses, a.cfg.TLSCertFile, a.cfg.TLSKeyFile)
	if err != nil {
		return nil, fmt.Errorf("nodelet: %w", err)
	}
	if err := a.metrics.CertificateTTL("server", s.Current); err != nil {
		return nil, fmt.Errorf("nodelet: %w", err)
	}
	w.serving = s
	return s.GetCertificate, nil
}
