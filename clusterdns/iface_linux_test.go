package clusterdns

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/miekg/dns"
	"github.com/vishvananda/netlink"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodelet/nodelet/test/testkit"
)

// addrsOf lists the /32 (/128) IPv4 addresses the package considers its own.
func ownIPs(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, name := range []string{InterfaceName, "lo"} {
		link, err := netlink.LinkByName(name)
		if err != nil {
			continue
		}
		addrs, err := ownAddresses(link, map[string]string{InterfaceName: InterfaceName, "lo": loLabel}[name])
		if err != nil {
			t.Errorf("%v", err)
		}
		for _, a := range addrs {
			out = append(out, a.IPNet.String())
		}
	}
	slices.Sort(out)
	return out
}

func TestAddressesInNetns(t *testing.T) {
	testkit.InNewNetns(t, func() {
		// An address of the host's own on lo must survive everything.
		lo, _ := netlink.LinkByName("lo")
		other := &netlink.Addr{IPNet: &net.IPNet{IP: net.IPv4(10, 1, 2, 3), Mask: net.CIDRMask(32, 32)}}
		if err := netlink.AddrAdd(lo, other); err != nil {
			t.Fatalf("add other address: %v", err)
		}
		ip := netip.MustParseAddr("10.96.0.10")
		link, err := EnsureAddresses([]netip.Addr{ip})
		if err != nil {
			t.Fatalf("EnsureAddresses: %v", err)
		}
		t.Logf("cluster DNS IP on %s", link)
		if got := ownIPs(t); !slices.Equal(got, []string{"10.96.0.10/32"}) {
			t.Fatalf("addresses %q, want 10.96.0.10/32", got)
		}
		if _, err := EnsureAddresses([]netip.Addr{ip}); err != nil { // a restart
			t.Fatalf("EnsureAddresses again: %v", err)
		}
		// Another IP replaces the old one.
		ip = netip.MustParseAddr("10.96.0.11")
		if _, err := EnsureAddresses([]netip.Addr{ip}); err != nil {
			t.Fatalf("EnsureAddresses 10.96.0.11: %v", err)
		}
		if got := ownIPs(t); !slices.Equal(got, []string{"10.96.0.11/32"}) {
			t.Fatalf("addresses %q, want 10.96.0.11/32", got)
		}

		// Served on the address: port 53, UDP and TCP.
		f := informers.NewSharedInformerFactory(fake.NewClientset(testObjects()...), 0)
		src, err := NewInformerSource(f)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer f.Shutdown()
		defer cancel()
		if !src.Start(ctx) {
			t.Fatal("informers did not sync")
		}
		srv, _ := New(Config{Domain: "cluster.local", Source: src})
		pcs, lns, err := Listen([]string{"10.96.0.11:53"})
		if err != nil {
			t.Fatalf("listen on the cluster DNS IP: %v", err)
		}
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ctx, pcs, lns) }()
		for _, network := range []string{"udp", "tcp"} {
			r := query(t, "10.96.0.11:53", network, "kubernetes.default.svc.cluster.local.", dns.TypeA)
			if got := answers(r.Answer); !slices.Equal(got, []string{"A 10.96.0.1"}) {
				t.Errorf("%s: answer %q", network, got)
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}

		if err := RemoveAddresses(); err != nil {
			t.Fatalf("RemoveAddresses: %v", err)
		}
		if got := ownIPs(t); len(got) != 0 {
			t.Fatalf("addresses left: %q", got)
		}
		if _, err := netlink.LinkByName(InterfaceName); err == nil {
			t.Errorf("%s still exists", InterfaceName)
		}
		if err := RemoveAddresses(); err != nil {
			t.Fatalf("RemoveAddresses again: %v", err)
		}
		addrs, _ := netlink.AddrList(lo, netlink.FAMILY_V4)
		if !slices.ContainsFunc(addrs, func(a netlink.Addr) bool { return a.IP.Equal(other.IP) }) {
			t.Errorf("the other address on lo was removed: %v", addrs)
		}
	})
}
