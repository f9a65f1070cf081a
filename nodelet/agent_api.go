package nodelet

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	certutil "k8s.io/client-go/util/cert"

	"github.com/nodelet/nodelet/nodeapi"
)

// apiServer builds the nodelet's HTTPS API over the running agent.
func (a *Agent) apiServer(w *wired, stats nodeapi.Stats) (*nodeapi.Server, error) {
	var cert tls.Certificate
	var issued func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	var err error
	if a.cfg.Credentials.ServerTLSBootstrap {
		issued, err = a.issuedServingCert(w)
	} else {
		cert, err = a.servingCert(w.node.Host().InternalIP)
	}
	if err != nil {
		return nil, err
	}
	cas, err := a.clientCAs()
	if err != nil {
		return nil, err
	}
	// Callers are authenticated and authorized as upstream's kubelet
	// does: client certificates, then (with webhook authentication)
	// bearer tokens the API server reviews; then (Webhook authorization)
	// the API server's SubjectAccessReview.
	authn, authz, err := nodeapi.Delegated(a.cfg.Access, a.client, cas)
	if err != nil {
		return nil, err
	}
	return nodeapi.New(nodeapi.Config{
		Address:     net.JoinHostPort(a.cfg.Address, strconv.Itoa(a.cfg.Port)),
		Certificate: cert, GetCertificate: issued, ClientCAs: cas,
		Pods:    func() []*corev1.Pod { return informerPods(w) },
		Runtime: w.rt, Stats: stats, LogRoot: a.cfg.LogRoot,
		Metrics: a.metrics.Handler(), ProbeMetrics: a.metrics.ProbesHandler(),
		NodeName: a.cfg.NodeName, Authenticator: authn, Authorizer: authz,
		Log: a.log,
	})
}

func informerPods(w *wired) []*corev1.Pod {
	var out []*corev1.Pod
	for _, obj := range w.pods.GetStore().List() {
		if p, ok := obj.(*corev1.Pod); ok {
			out = append(out, p)
		}
	}
	return out
}

// clientCAs are the CAs callers' certificates must chain to:
// --client-ca-file, else the CA the kubeconfig trusts for the API server
// (the cluster CA).
func (a *Agent) clientCAs() (*x509.CertPool, error) {
	var data []byte
	var err error
	switch {
	case a.cfg.ClientCAFile != "":
		data, err = os.ReadFile(a.cfg.ClientCAFile)
	case a.cfg.RestConfig != nil && len(a.cfg.RestConfig.CAData) > 0:
		data = a.cfg.RestConfig.CAData
	case a.cfg.RestConfig != nil && a.cfg.RestConfig.CAFile != "":
		data, err = os.ReadFile(a.cfg.RestConfig.CAFile)
	default:
		return nil, errors.New("nodelet: no client CA: set --client-ca-file")
	}
	if err != nil {
		return nil, fmt.Errorf("nodelet: read client CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, errors.New("nodelet: client CA holds no PEM certificate")
	}
	return pool, nil
}

// servingCert loads --tls-cert-file and --tls-private-key-file. Without
// them, as upstream's kubelet, the nodelet serves a self-signed
// certificate: its API works for direct callers that accept it, but the
// API server, which verifies nodes against the cluster CA, will refuse it
// (issue one with `controlplane serving-cert`, or have the control plane
// issue it: --rotate-server-certificates, see issuedServingCert).
func (a *Agent) servingCert(nodeIP string) (tls.Certificate, error) {
	if a.cfg.TLSCertFile != "" || a.cfg.TLSKeyFile != "" {
		cert, err := tls.LoadX509KeyPair(a.cfg.TLSCertFile, a.cfg.TLSKeyFile)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("nodelet: serving certificate: %w", err)
		}
		return cert, nil
	}
	a.log.Warn("no --tls-cert-file nor --rotate-server-certificates: serving a self-signed certificate the API server will not accept; kubectl logs/exec/port-forward will fail")
	var ips []net.IP
	if ip := net.ParseIP(nodeIP); ip != nil {
		ips = []net.IP{ip}
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(a.cfg.NodeName, ips, nil)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("nodelet: self-signed certificate: %w", err)
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}
