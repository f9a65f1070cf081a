package nodecerts

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestServingTemplate(t *testing.T) {
	addr := func(typ corev1.NodeAddressType, a string) corev1.NodeAddress {
		return corev1.NodeAddress{Type: typ, Address: a}
	}
	for _, tc := range []struct {
		name      string
		addrs     []corev1.NodeAddress
		wantNil   bool
		wantNames []string
		wantIPs   []string
	}{
		{name: "not registered yet", wantNil: true},
		{name: "hostname only", addrs: []corev1.NodeAddress{addr(corev1.NodeHostName, "n1")}, wantNil: true},
		{name: "internal IP and hostname",
			addrs:     []corev1.NodeAddress{addr(corev1.NodeInternalIP, "10.0.0.2"), addr(corev1.NodeHostName, "n1")},
			wantNames: []string{"n1"}, wantIPs: []string{"10.0.0.2"}},
		{name: "sorted without duplicates, a hostname that is an IP counts as one",
			addrs: []corev1.NodeAddress{addr(corev1.NodeExternalIP, "192.0.2.9"), addr(corev1.NodeInternalIP, "10.0.0.2"),
				addr(corev1.NodeHostName, "10.0.0.2"), addr(corev1.NodeInternalDNS, "n1.internal"), addr(corev1.NodeExternalDNS, "a.example"),
				addr(corev1.NodeInternalDNS, "n1.internal"), addr(corev1.NodeInternalIP, "")},
			wantNames: []string{"a.example", "n1.internal"}, wantIPs: []string{"10.0.0.2", "192.0.2.9"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := servingTemplate("n1", tc.addrs)
			if tc.wantNil {
				if got != nil {
					t.Fatalf("template %+v, want none", got)
				}
				return
			}
			var ips []string
			for _, ip := range got.IPAddresses {
				ips = append(ips, ip.String())
			}
			if got.Subject.CommonName != "system:node:n1" || !reflect.DeepEqual(got.Subject.Organization, []string{"system:nodes"}) ||
				!reflect.DeepEqual(got.DNSNames, tc.wantNames) || !reflect.DeepEqual(ips, tc.wantIPs) {
				t.Errorf("template: subject %v, names %v, IPs %v; want %v, %v", got.Subject, got.DNSNames, ips, tc.wantNames, tc.wantIPs)
			}
		})
	}
	// The manager compares templates to see whether the node's addresses
	// changed: the same addresses must give an equal template.
	a := []corev1.NodeAddress{addr(corev1.NodeInternalIP, "10.0.0.2"), addr(corev1.NodeHostName, "n1")}
	if !reflect.DeepEqual(servingTemplate("n1", a), servingTemplate("n1", a)) {
		t.Error("equal addresses give different templates")
	}
}
