package nodestatus

import (
	"net"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/nodelet/nodelet/test/testkit"
)

func TestServerIP(t *testing.T) {
	for in, want := range map[string]string{
		"https://10.240.0.1:6443": "10.240.0.1",
		"https://[fd00::1]:6443":  "fd00::1",
		"10.1.2.3:443":            "10.1.2.3",
		"10.1.2.3":                "10.1.2.3",
		"https://127.0.0.1":       "127.0.0.1",
		"":                        "<nil>",
	} {
		if got := serverIP(in).String(); got != want {
			t.Errorf("serverIP(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestRouteIPTo runs in a network namespace of its own with two
// interfaces: the default route on one, the API server's subnet on the
// other. The node's address is the second's.
func TestRouteIPTo(t *testing.T) {
	testkit.InNewNetns(t, func() { testRouteIPTo(t) })
}

func testRouteIPTo(t *testing.T) {
	addVeth := func(name, peer, cidr string) netlink.Link {
		la := netlink.NewLinkAttrs()
		la.Name = name
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: peer}); err != nil {
			t.Fatalf("add veth %s: %v", name, err)
		}
		link, err := netlink.LinkByName(name)
		if err != nil {
			t.Fatal(err)
		}
		addr, _ := netlink.ParseAddr(cidr)
		if err := netlink.AddrAdd(link, addr); err != nil {
			t.Fatalf("address %s: %v", cidr, err)
		}
		for _, n := range []string{name, peer} {
			l, _ := netlink.LinkByName(n)
			if err := netlink.LinkSetUp(l); err != nil {
				t.Fatal(err)
			}
		}
		return link
	}
	wan := addVeth("wan0", "wan1", "192.0.2.10/24")
	addVeth("lab0", "lab1", "10.240.0.11/24")
	if err := netlink.RouteAdd(&netlink.Route{LinkIndex: wan.Attrs().Index, Gw: net.ParseIP("192.0.2.1")}); err != nil {
		t.Fatalf("default route: %v", err)
	}

	for server, want := range map[string]string{
		"https://10.240.0.1:6443": "10.240.0.11", // the lab interface, not the default route's
		"https://127.0.0.1:6443":  "192.0.2.10",  // loopback: the default route's
		"https://198.51.100.7":    "192.0.2.10",  // reached through the default route
	} {
		ip, err := RouteIPTo(server)
		if err != nil {
			t.Errorf("RouteIPTo(%s): %v", server, err)
			continue
		}
		if ip.String() != want {
			t.Errorf("RouteIPTo(%s) = %s, want %s", server, ip, want)
		}
	}
}
