package controlplane

import "testing"

// The kube-dns Service's address: the service CIDR's tenth by default, and
// it must lie in the CIDR.
func TestClusterDNSIPDefault(t *testing.T) {
	base := Config{DataDir: t.TempDir(), SecurePort: 6443, BindAddress: "127.0.0.1"}
	for _, tc := range []struct {
		cidr, ip, want string
		fails          bool
	}{
		{"", "", "10.96.0.10", false},
		{"10.100.0.0/16", "", "10.100.0.10", false},
		{"", "10.96.0.53", "10.96.0.53", false},
		{"", "10.97.0.10", "", false}, // inside 10.96.0.0/12
		{"", "192.168.0.10", "", true},
		{"", "bogus", "", true},
	} {
		cfg := base
		cfg.ServiceCIDR, cfg.ClusterDNSIP = tc.cidr, tc.ip
		c, err := New(cfg)
		if (err != nil) != tc.fails {
			t.Errorf("New(cidr %q, dns %q): err %v, want failure %v", tc.cidr, tc.ip, err, tc.fails)
			continue
		}
		if err == nil && tc.want != "" && c.cfg.ClusterDNSIP != tc.want {
			t.Errorf("New(cidr %q, dns %q): cluster DNS IP %s, want %s", tc.cidr, tc.ip, c.cfg.ClusterDNSIP, tc.want)
		}
	}
}
