package network

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/nodelet/nodelet/hosttools"
	"github.com/nodelet/nodelet/test/testkit"
)

// The routes tests act in network namespaces they create under a
// temporary directory and hand to Routes as RoutesConfig.NetNS, so the
// netns path of the code is what runs. Each namespace holds a veth pair
// (both ends inside) whose address makes the peers' IPs on-link. No
// packet is sent anywhere.

// routesTestNetNS creates a netns for t and removes it when t ends; a
// namespace left behind fails the test.
func routesTestNetNS(t *testing.T, name string) (string, *netlink.Handle) {
	t.Helper()
	testkit.RequireRoot(t, "netns, routes, nftables")
	if err := hosttools.Check("nsenter", "nft"); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := createNetNS(path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := removeNetNS(path); err != nil {
			t.Errorf("remove test netns: %v", err)
		}
		if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("test netns %s left behind: %v", path, err)
		}
	})
	ns, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return path, h
}

// addVeth gives the netns of h a veth pair, up, with addr on its first end.
func addVeth(t *testing.T, h *netlink.Handle, addr string) {
	t.Helper()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "nlr0"}, PeerName: "nlr1"}
	if err := h.LinkAdd(veth); err != nil {
		t.Fatalf("add veth: %v", err)
	}
	p := netip.MustParsePrefix(addr)
	a := &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}}
	if p.Addr().Is6() {
		a.Flags = unix.IFA_F_NODAD // usable at once, no tentative state
	}
	for _, name := range []string{"lo", "nlr1", "nlr0"} {
		link, err := h.LinkByName(name)
		if err != nil {
			t.Fatal(err)
		}
		if name == "nlr0" {
			if err := h.AddrAdd(link, a); err != nil {
				t.Fatalf("add %s to %s: %v", addr, name, err)
			}
		}
		if err := h.LinkSetUp(link); err != nil {
			t.Fatalf("set %s up: %v", name, err)
		}
	}
}

func newTestRoutes(t *testing.T, ns, podCIDR, nodeIP string) *Routes {
	t.Helper()
	r, err := NewRoutes(RoutesConfig{
		PodCIDR: netip.MustParsePrefix(podCIDR), NodeIP: netip.MustParseAddr(nodeIP), NetNS: ns,
		Log: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustSync(t *testing.T, r *Routes, peers ...Peer) {
	t.Helper()
	if err := r.Sync(context.Background(), peers); err != nil {
		t.Fatalf("Sync: %v", err)
	}
}

// routesByProto maps the destinations of the main table's routes with
// protocol proto to their gateways.
func routesByProto(t *testing.T, h *netlink.Handle, proto netlink.RouteProtocol) map[string]string {
	t.Helper()
	rts, err := h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Protocol: proto}, netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, rt := range rts {
		out[rt.Dst.String()] = rt.Gw.String()
	}
	return out
}

func assertOwnRoutes(t *testing.T, h *netlink.Handle, want map[string]string) {
	t.Helper()
	if got := routesByProto(t, h, RouteProtocol); !mapsEqual(got, want) {
		t.Errorf("routes with protocol %d = %v, want %v", RouteProtocol, got, want)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// nftList lists the nodelet's table of family in the netns at ns.
func nftList(ns, family string) (string, error) {
	out, err := hosttools.Command("nsenter", "--net="+ns, "nft", "list", "table", family, masqTable).CombinedOutput()
	return string(out), err
}

// assertMasqTable checks the table as nft decodes it: the set's elements
// and exactly the two rules of the chain, in order.
func assertMasqTable(t *testing.T, ns, family, podCIDR, elements string) {
	t.Helper()
	out, err := nftList(ns, family)
	if err != nil {
		t.Fatalf("nft list table %s %s: %v\n%s", family, masqTable, err, out)
	}
	flat := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{
		"set " + masqSet + " {", "flags interval", "elements = { " + elements + " }",
		"chain " + masqChain + " { type nat hook postrouting priority srcnat; policy accept;",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("nft table lacks %q:\n%s", want, out)
		}
	}
	wantRules := []string{
		family + " saddr " + podCIDR + " " + family + " daddr @" + masqSet + " return",
		family + " saddr " + podCIDR + " masquerade",
	}
	if got := chainRules(out, masqChain); !slices.Equal(got, wantRules) {
		t.Errorf("rules of chain %s = %q, want %q\n%s", masqChain, got, wantRules, out)
	}
}

// chainRules are the rules of chain in an `nft list table` output.
func chainRules(listing, chain string) []string {
	var rules []string
	in := false
	for line := range strings.Lines(listing) {
		line = strings.TrimSpace(line)
		switch {
		case line == "chain "+chain+" {":
			in = true
		case !in || line == "" || strings.HasPrefix(line, "type "):
		case line == "}":
			in = false
		default:
			rules = append(rules, line)
		}
	}
	return rules
}

func nsRun(t *testing.T, ns string, args ...string) {
	t.Helper()
	if out, err := hosttools.Command("nsenter", append([]string{"--net=" + ns}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
}

func TestRoutesSync(t *testing.T) {
	ns, h := routesTestNetNS(t, "node")
	addVeth(t, h, "10.240.0.11/24")
	// A route of another protocol, to a destination no peer wants.
	static := dumpedRoute("10.99.0.0/16", "10.240.0.1", unix.RTPROT_STATIC, 0)
	static.LinkIndex = 0
	if err := h.RouteAdd(&static); err != nil {
		t.Fatal(err)
	}
	wantStatic := map[string]string{"10.99.0.0/16": "10.240.0.1"}

	r := newTestRoutes(t, ns, "10.244.1.0/24", "10.240.0.11")
	b, c := peer("b", "10.240.0.12", "10.244.3.0/24"), peer("c", "10.240.0.14", "10.244.5.0/24")
	mustSync(t, r, b, c)
	assertOwnRoutes(t, h, map[string]string{"10.244.3.0/24": "10.240.0.12", "10.244.5.0/24": "10.240.0.14"})
	assertMasqTable(t, ns, "ip", "10.244.1.0/24",
		"10.240.0.11-10.240.0.12, 10.240.0.14, 10.244.1.0/24, 10.244.3.0/24, 10.244.5.0/24")
	if r.nftTransactions != 1 || r.routeWrites != 2 {
		t.Errorf("first Sync: %d nft transactions, %d route writes; want 1, 2", r.nftTransactions, r.routeWrites)
	}

	t.Run("unchanged peers cost nothing", func(t *testing.T) {
		mustSync(t, r, c, b)
		if r.nftTransactions != 1 || r.routeWrites != 2 {
			t.Errorf("after a Sync without change: %d nft transactions, %d route writes; want 1, 2", r.nftTransactions, r.routeWrites)
		}
	})
	t.Run("change of IP replaces the route", func(t *testing.T) {
		c.IP = netip.MustParseAddr("10.240.0.24")
		mustSync(t, r, b, c)
		assertOwnRoutes(t, h, map[string]string{"10.244.3.0/24": "10.240.0.12", "10.244.5.0/24": "10.240.0.24"})
		assertMasqTable(t, ns, "ip", "10.244.1.0/24",
			"10.240.0.11-10.240.0.12, 10.240.0.24, 10.244.1.0/24, 10.244.3.0/24, 10.244.5.0/24")
	})
	t.Run("removed peer loses its route", func(t *testing.T) {
		mustSync(t, r, c)
		assertOwnRoutes(t, h, map[string]string{"10.244.5.0/24": "10.240.0.24"})
		assertMasqTable(t, ns, "ip", "10.244.1.0/24", "10.240.0.11, 10.240.0.24, 10.244.1.0/24, 10.244.5.0/24")
	})
	d, e := peer("d", "192.0.2.7", "10.244.7.0/24"), peer("e", "10.240.0.15", "10.244.8.0/24")
	t.Run("off-link peer fails alone", func(t *testing.T) {
		err := r.Sync(context.Background(), []Peer{c, d, e})
		if err == nil || !strings.Contains(err.Error(), "node d") || strings.Contains(err.Error(), "node e") {
			t.Fatalf("Sync with off-link peer d: error = %v, want one naming d only", err)
		}
		t.Logf("Sync with an off-link peer: %v", err)
		if !errors.Is(err, unix.ENETUNREACH) {
			t.Errorf("error %v is not ENETUNREACH", err)
		}
		assertOwnRoutes(t, h, map[string]string{"10.244.5.0/24": "10.240.0.24", "10.244.8.0/24": "10.240.0.15"})
		assertMasqTable(t, ns, "ip", "10.244.1.0/24",
			"10.240.0.11, 10.240.0.15, 10.240.0.24, 10.244.1.0/24, 10.244.5.0/24, 10.244.7.0-10.244.8.255, 192.0.2.7")
	})
	t.Run("restart repairs a stale table and keeps the routes", func(t *testing.T) {
		nsRun(t, ns, "nft", "add", "chain", "ip", masqTable, "junk")
		nsRun(t, ns, "nft", "add", "rule", "ip", masqTable, masqChain, "counter", "accept")
		r2 := newTestRoutes(t, ns, "10.244.1.0/24", "10.240.0.11")
		mustSync(t, r2, c, e)
		if r2.nftTransactions != 1 || r2.routeWrites != 0 {
			t.Errorf("first Sync after restart: %d nft transactions, %d route writes; want 1, 0", r2.nftTransactions, r2.routeWrites)
		}
		assertOwnRoutes(t, h, map[string]string{"10.244.5.0/24": "10.240.0.24", "10.244.8.0/24": "10.240.0.15"})
		assertMasqTable(t, ns, "ip", "10.244.1.0/24", "10.240.0.11, 10.240.0.15, 10.240.0.24, 10.244.1.0/24, 10.244.5.0/24, 10.244.8.0/24")
		if out, _ := nftList(ns, "ip"); strings.Contains(out, "junk") {
			t.Errorf("stale chain survived the first Sync:\n%s", out)
		}
	})
	t.Run("cleanup removes ours only", func(t *testing.T) { testCleanup(t, ns, h, wantStatic) })
}

// testCleanup checks that Cleanup, twice, leaves no route of ours and no
// table, and the static routes in wantStatic.
func testCleanup(t *testing.T, ns string, h *netlink.Handle, wantStatic map[string]string) {
	for range 2 { // the second finds nothing, which is success
		if err := Cleanup(ns); err != nil {
			t.Fatalf("Cleanup: %v", err)
		}
	}
	assertOwnRoutes(t, h, map[string]string{})
	if got := routesByProto(t, h, unix.RTPROT_STATIC); !mapsEqual(got, wantStatic) {
		t.Errorf("static routes after Cleanup = %v, want %v", got, wantStatic)
	}
	if out, err := nftList(ns, "ip"); err == nil {
		t.Errorf("table ip %s still there after Cleanup:\n%s", masqTable, out)
	}
}

func TestRoutesSyncIPv6(t *testing.T) {
	ns, h := routesTestNetNS(t, "node6")
	addVeth(t, h, "fd00:240::11/64")
	r := newTestRoutes(t, ns, "fd00:10:244:1::/64", "fd00:240::11")
	b := peer("b", "fd00:240::12", "fd00:10:244:2::/64")
	// The IPv4 CIDR of a dual-stack peer is not this Routes' business.
	c := peer("c", "fd00:240::20", "fd00:10:244:3::/64", "10.244.3.0/24")
	for range 2 {
		mustSync(t, r, b, c)
	}
	if r.nftTransactions != 1 || r.routeWrites != 2 {
		t.Errorf("two Syncs: %d nft transactions, %d route writes; want 1, 2", r.nftTransactions, r.routeWrites)
	}
	assertOwnRoutes(t, h, map[string]string{"fd00:10:244:2::/64": "fd00:240::12", "fd00:10:244:3::/64": "fd00:240::20"})
	assertMasqTable(t, ns, "ip6", "fd00:10:244:1::/64",
		"fd00:10:244:1::-fd00:10:244:3:ffff:ffff:ffff:ffff, fd00:240::11-fd00:240::12, fd00:240::20")
	if err := Cleanup(ns); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	assertOwnRoutes(t, h, map[string]string{})
	if out, err := nftList(ns, "ip6"); err == nil {
		t.Errorf("table ip6 %s still there after Cleanup:\n%s", masqTable, out)
	}
}
