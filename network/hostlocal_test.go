package network

import (
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"

	types100 "github.com/containernetworking/cni/pkg/types/100"
)

func TestParseReservation(t *testing.T) {
	tests := []struct {
		name, content string
		wantID        string
		ok            bool
	}{
		{"10.244.1.2", "abc123\r\neth0", "abc123", true},
		{"10.244.1.3", "old-style-id", "old-style-id", true}, // written by old host-local
		{"fd00::5", "v6id\r\neth0", "v6id", true},
		{"last_reserved_ip.0", "10.244.1.3", "", false},
		{"lock", "", "", false},
		{"10.244.1.4", "", "", false},
	}
	for _, tt := range tests {
		r, ok := parseReservation(tt.name, []byte(tt.content))
		if ok != tt.ok || r.ContainerID != tt.wantID {
			t.Errorf("parseReservation(%q, %q) = %+v, %v; want id %q, %v", tt.name, tt.content, r, ok, tt.wantID, tt.ok)
		}
	}
}

func TestReleaseReservations(t *testing.T) {
	dir := t.TempDir()
	netDir := filepath.Join(dir, "nodelet")
	if err := os.MkdirAll(netDir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"10.244.1.2":         "live1\r\neth0",
		"10.244.1.3":         "dead1\r\neth0",
		"10.244.1.4":         "dead2",
		"last_reserved_ip.0": "10.244.1.4",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(netDir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	released, err := releaseReservations(dir, func(id string) bool { return id != "live1" })
	if err != nil {
		t.Fatal(err)
	}
	var ips []string
	for _, r := range released {
		ips = append(ips, r.IP.String())
	}
	slices.Sort(ips)
	if !slices.Equal(ips, []string{"10.244.1.3", "10.244.1.4"}) {
		t.Errorf("released %v, want 10.244.1.3 and 10.244.1.4", ips)
	}
	entries, _ := os.ReadDir(netDir)
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if !slices.Equal(left, []string{"10.244.1.2", "last_reserved_ip.0", "lock"}) {
		t.Errorf("left %v", left)
	}
	if _, err := releaseReservations(filepath.Join(dir, "missing"), func(string) bool { return true }); err != nil {
		t.Errorf("missing IPAM dir: %v", err)
	}
}

func TestToResult(t *testing.T) {
	zero, one := 0, 1
	res := &types100.Result{
		CNIVersion: "1.0.0",
		Interfaces: []*types100.Interface{
			{Name: "nlt0"},
			{Name: "eth0", Sandbox: "/run/nodelet/netns/abc"},
		},
		IPs: []*types100.IPConfig{
			{Interface: &zero, Address: mustIPNet("10.244.1.1/24")}, // the bridge: not the pod's
			{Interface: &one, Address: mustIPNet("fd00::7/64")},
			{Interface: &one, Address: mustIPNet("10.244.1.7/24")},
		},
	}
	got, err := toResult(res, "/run/nodelet/netns/abc")
	if err != nil {
		t.Fatal(err)
	}
	if got.IP != netip.MustParseAddr("10.244.1.7") {
		t.Errorf("IP = %s, want the IPv4 one", got.IP)
	}
	if len(got.IPs) != 2 || got.NetNSPath != "/run/nodelet/netns/abc" {
		t.Errorf("result = %+v", got)
	}
	if _, err := toResult(&types100.Result{CNIVersion: "1.0.0"}, "/x"); err == nil {
		t.Errorf("toResult of an empty result succeeded")
	}
}

func mustIPNet(s string) net.IPNet {
	ip, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	n.IP = ip
	return *n
}

func TestValidateID(t *testing.T) {
	for _, id := range []string{"abc", "0123456789abcdef", "a.b-c_d"} {
		if err := validateID(id); err != nil {
			t.Errorf("validateID(%q) = %v", id, err)
		}
	}
	for _, id := range []string{"", "../x", "a/b", ".hidden", "-x", "a b"} {
		if err := validateID(id); err == nil {
			t.Errorf("validateID(%q) accepted", id)
		}
	}
}
