package servingcsr

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"slices"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
)

// Only a node asking for itself, in the kubelet-serving shape, is
// recognised; of its names, those the Node does not report are listed.
func TestRecognise(t *testing.T) {
	req := func(cn string, orgs []string, dns []string, ips ...string) *x509.CertificateRequest {
		r := &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn, Organization: orgs}, DNSNames: dns}
		for _, ip := range ips {
			r.IPAddresses = append(r.IPAddresses, net.ParseIP(ip))
		}
		return r
	}
	serving := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
	csr := func(user string, groups []string, usages []certificatesv1.KeyUsage) *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{
			Username: user, Groups: groups, Usages: usages, SignerName: certificatesv1.KubeletServingSignerName}}
	}
	nodes := []string{"system:nodes", "system:authenticated"}
	good := req("system:node:n1", []string{"system:nodes"}, []string{"n1"}, "10.0.0.5")
	for _, tc := range []struct {
		name string
		csr  *certificatesv1.CertificateSigningRequest
		req  *x509.CertificateRequest
		want bool
	}{
		{"the node itself", csr("system:node:n1", nodes, serving), good, true},
		{"another node's name", csr("system:node:n2", nodes, serving), good, false},
		{"not in system:nodes", csr("system:node:n1", []string{"system:authenticated"}, serving), good, false},
		{"a bootstrap token", csr("system:bootstrap:abcdef", []string{"system:bootstrappers"}, serving), good, false},
		{"client usages", csr("system:node:n1", nodes, []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}), good, false},
		{"another organization", csr("system:node:n1", nodes, serving), req("system:node:n1", []string{"system:masters"}, []string{"n1"}), false},
		{"no names", csr("system:node:n1", nodes, serving), req("system:node:n1", []string{"system:nodes"}, nil), false},
	} {
		name, ok := requestingNode(tc.csr, tc.req)
		if ok != tc.want || (ok && name != "n1") {
			t.Errorf("%s: node %q, recognised %v; want %v", tc.name, name, ok, tc.want)
		}
	}
	node := &corev1.Node{Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
		{Type: corev1.NodeHostName, Address: "n1"}, {Type: corev1.NodeInternalIP, Address: "10.0.0.5"}}}}
	if missing := uncovered(good, node); len(missing) != 0 {
		t.Errorf("the node's own names uncovered: %v", missing)
	}
	other := req("system:node:n1", []string{"system:nodes"}, []string{"n1", "kubernetes.default"}, "10.0.0.5", "10.0.0.9")
	if missing := uncovered(other, node); !slices.Equal(missing, []string{"kubernetes.default", "10.0.0.9"}) {
		t.Errorf("uncovered = %v", missing)
	}
}
