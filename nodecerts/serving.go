package nodecerts

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/certificate"
)

// Serving is the serving certificate of the node's HTTPS API, from the
// control plane, as upstream kubelet's with serverTLSBootstrap: client-go's
// certificate Manager asks for one of signer kubernetes.io/kubelet-serving
// for CN=system:node:NAME, O=system:nodes and the names and addresses the
// Node reports (none is asked for before it reports an IP: the approver
// checks them against the Node), stores it in the certificate directory
// (kubelet-server-current.pem), renews it before expiry and asks again
// when the addresses change.
type Serving struct {
	manager certificate.Manager
	log     *slog.Logger
}

// NewServing builds the manager. client is the node's own API client;
// addresses returns the addresses of the Node as last written (nil before
// that). certFile and keyFile (--tls-cert-file, optional) are the
// certificate served until the first one is issued.
func NewServing(cfg Config, client kubernetes.Interface, addresses func() []corev1.NodeAddress, certFile, keyFile string) (*Serving, error) {
	cfg.defaults()
	store, err := certificate.NewFileStore(serverPair, cfg.CertDir, cfg.CertDir, certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("serving certificate store %s: %w", cfg.CertDir, err)
	}
	m, err := certificate.NewManager(&certificate.Config{
		ClientsetFn: func(*tls.Certificate) (kubernetes.Interface, error) { return client, nil },
		GetTemplate: func() *x509.CertificateRequest { return servingTemplate(cfg.NodeName, addresses()) },
		SignerName:  certificatesv1.KubeletServingSignerName,
		GetUsages:   certificate.DefaultKubeletServingGetUsages,
		// The directory is created on the first store.
		CertificateStore: store,
		Name:             "serving certificate",
	})
	if err != nil {
		return nil, fmt.Errorf("serving certificate manager: %w", err)
	}
	return &Serving{manager: m, log: cfg.Log}, nil
}

// Run asks for and renews the certificate until ctx ends, logging each
// one it gets (the manager's own logs are klog's verbose ones).
func (s *Serving) Run(ctx context.Context) error {
	follow(ctx, s.manager, func(last, cur *tls.Certificate) {
		if cur == nil {
			return // expired: the manager asks again
		}
		what := "serving certificate renewed"
		if last == nil {
			what = "serving certificate issued"
		}
		s.log.Info(what, "dnsNames", cur.Leaf.DNSNames, "ips", cur.Leaf.IPAddresses, "notAfter", cur.Leaf.NotAfter)
	})
	return nil
}

// Current is the serving certificate, nil before one is issued.
func (s *Serving) Current() *tls.Certificate { return s.manager.Current() }

// GetCertificate is tls.Config's: the current certificate. Until one is
// issued the handshake fails, as upstream kubelet's: there is nothing the
// API server would accept to serve.
func (s *Serving) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := s.manager.Current(); c != nil {
		return c, nil
	}
	return nil, errors.New("no serving certificate issued yet")
}

// servingTemplate is the request for the node's addresses: DNS names from
// its hostname and DNS addresses, IPs from its IP addresses (a hostname
// that is an IP counts as one), sorted and without duplicates; nil while
// the node reports no IP, as upstream.
func servingTemplate(nodeName string, addrs []corev1.NodeAddress) *x509.CertificateRequest {
	var names []string
	var ips []net.IP
	for _, a := range addrs {
		ip := net.ParseIP(a.Address)
		switch a.Type {
		case corev1.NodeHostName:
			if ip != nil {
				ips = append(ips, ip)
			} else if a.Address != "" {
				names = append(names, a.Address)
			}
		case corev1.NodeInternalIP, corev1.NodeExternalIP:
			if ip != nil {
				ips = append(ips, ip)
			}
		case corev1.NodeInternalDNS, corev1.NodeExternalDNS:
			if a.Address != "" {
				names = append(names, a.Address)
			}
		}
	}
	if len(ips) == 0 {
		return nil
	}
	slices.Sort(names)
	names = slices.Compact(names)
	slices.SortFunc(ips, func(a, b net.IP) int { return strings.Compare(a.String(), b.String()) })
	ips = slices.CompactFunc(ips, net.IP.Equal)
	return &x509.CertificateRequest{Subject: nodeSubject(nodeName), DNSNames: names, IPAddresses: ips}
}
