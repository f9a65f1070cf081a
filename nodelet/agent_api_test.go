package nodelet

import (
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"slices"
	"testing"
)

// TestSelfSignedServingCert: without --tls-cert-file the API serves a
// self-signed certificate for the node's name and address.
func TestSelfSignedServingCert(t *testing.T) {
	a := &Agent{cfg: Config{NodeName: "node-a"}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	cert, err := a.servingCert("10.0.0.7")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := leaf.VerifyHostname("10.0.0.7"); err != nil {
		t.Errorf("not valid for the node's IP: %v", err)
	}
	if err := leaf.VerifyHostname("node-a"); err != nil {
		t.Errorf("not valid for the node's name: %v", err)
	}
	if !slices.ContainsFunc(leaf.IPAddresses, net.ParseIP("10.0.0.7").Equal) {
		t.Errorf("IP SANs %v", leaf.IPAddresses)
	}
}
