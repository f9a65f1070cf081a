// Package nodeclient is how the control plane reaches nodelets: the URL of
// a node's HTTPS API from its Node object, and one transport that verifies
// every nodelet's serving certificate against the cluster CA and presents
// the API server's client certificate.
package nodeclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// ErrNoAddress is returned (wrapped) for a node that publishes no address
// or no port to reach its nodelet at.
var ErrNoAddress = errors.New("node has no address for its nodelet")

// APIServerUser is the identity the API server presents to nodelets
// (kubeadm's name for it); nodelets allow it without RBAC.
const APIServerUser = "kube-apiserver-kubelet-client"

// Config configures New.
type Config struct {
	// CAs verify the nodelets' serving certificates.
	CAs *x509.CertPool
	// ClientCert is the API server's identity towards nodelets.
	ClientCert tls.Certificate
	// AddressTypes is the preference order (default: InternalIP first, as
	// nodes' host names often do not resolve).
	AddressTypes []corev1.NodeAddressType
	// DialTimeout bounds connecting to a nodelet (default 10s).
	DialTimeout time.Duration
}

// Client reaches nodelets. It is safe for concurrent use.
type Client struct {
	types     []corev1.NodeAddressType
	transport *http.Transport
}

// New builds the shared transport.
func New(cfg Config) *Client {
	if len(cfg.AddressTypes) == 0 {
		cfg.AddressTypes = []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeHostName, corev1.NodeExternalIP}
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	dialer := &net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		DialContext:         dialer.DialContext,
		TLSClientConfig:     &tls.Config{RootCAs: cfg.CAs, Certificates: []tls.Certificate{cfg.ClientCert}, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: cfg.DialTimeout,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     90 * time.Second,
	}
	return &Client{types: cfg.AddressTypes, transport: tr}
}

// NodeLocation returns https://ADDRESS:PORT of the node's nodelet and the
// transport to use for it.
func (c *Client) NodeLocation(node *corev1.Node) (*url.URL, http.RoundTripper, error) {
	port := node.Status.DaemonEndpoints.KubeletEndpoint.Port
	if port <= 0 {
		return nil, nil, fmt.Errorf("node %q: %w: no kubelet port in its status", node.Name, ErrNoAddress)
	}
	for _, typ := range c.types {
		for _, a := range node.Status.Addresses {
			if a.Type == typ && a.Address != "" {
				u := &url.URL{Scheme: "https", Host: net.JoinHostPort(a.Address, strconv.Itoa(int(port)))}
				return u, c.transport, nil
			}
		}
	}
	return nil, nil, fmt.Errorf("node %q: %w", node.Name, ErrNoAddress)
}

// Get fetches path (e.g. "/stats/summary") from the node's nodelet and
// returns the body of a 200 answer; anything else is an error.
func (c *Client) Get(ctx context.Context, node *corev1.Node, path string) ([]byte, error) {
	base, rt, err := c.NodeLocation(node)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base.String()+path, nil)
	if err != nil {
		return nil, fmt.Errorf("get %s from node %q: %w", path, node.Name, err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, fmt.Errorf("get %s from node %q: %w", path, node.Name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("get %s from node %q: read: %w", path, node.Name, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("get %s from node %q: %s: %.200s", path, node.Name, resp.Status, body)
	}
	return body, nil
}

// Close drops idle connections.
func (c *Client) Close() { c.transport.CloseIdleConnections() }
