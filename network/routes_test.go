package network

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// dumpedRoute is a route as the kernel reports it in a dump.
func dumpedRoute(dst, gw string, proto netlink.RouteProtocol, metric int) netlink.Route {
	p := netip.MustParsePrefix(dst)
	rt := netlink.Route{
		LinkIndex: 2,
		Dst:       &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())},
		Protocol:  proto,
		Priority:  metric,
		Table:     unix.RT_TABLE_MAIN,
		Type:      unix.RTN_UNICAST,
		Scope:     netlink.SCOPE_UNIVERSE,
	}
	if gw == "" {
		rt.Scope = netlink.SCOPE_LINK
	} else {
		rt.Gw = net.IP(netip.MustParseAddr(gw).AsSlice())
	}
	return rt
}

func ours(dst, gw string) netlink.Route { return dumpedRoute(dst, gw, RouteProtocol, 0) }

func peer(name, ip string, cidrs ...string) Peer {
	p := Peer{Name: name}
	if ip != "" {
		p.IP = netip.MustParseAddr(ip)
	}
	for _, c := range cidrs {
		p.PodCIDRs = append(p.PodCIDRs, netip.MustParsePrefix(c))
	}
	return p
}

func describeRoute(rt netlink.Route) string {
	return fmt.Sprintf("%s via %s proto %d metric %d", rt.Dst, rt.Gw, rt.Protocol, rt.Priority)
}

// planRoutesCase is one case of TestPlanRoutes; own defaults to 10.244.1.0/24.
type planRoutesCase struct {
	name        string
	own         netip.Prefix
	peers       []Peer
	have        []netlink.Route
	wantReplace []string // "dst via gw proto metric (peer)"
	wantDel     []string
	wantProblem []string // substrings, one per problem
}

func planRoutesCases() []planRoutesCase {
	connected := dumpedRoute("10.240.0.0/24", "", unix.RTPROT_KERNEL, 0)
	return []planRoutesCase{
		{
			name:  "add",
			peers: []Peer{peer("c", "10.240.0.13", "10.244.3.0/24"), peer("b", "10.240.0.12", "10.244.2.0/24")},
			have:  []netlink.Route{connected},
			wantReplace: []string{
				"10.244.2.0/24 via 10.240.0.12 proto 157 metric 0 (b)",
				"10.244.3.0/24 via 10.240.0.13 proto 157 metric 0 (c)",
			},
		},
		{
			name:  "nothing to do",
			peers: []Peer{peer("b", "10.240.0.12", "10.244.2.0/24"), peer("c", "10.240.0.13", "10.244.3.0/24")},
			have:  []netlink.Route{connected, ours("10.244.3.0/24", "10.240.0.13"), ours("10.244.2.0/24", "10.240.0.12")},
		},
		{
			name:        "change of IP replaces in place",
			peers:       []Peer{peer("b", "10.240.0.22", "10.244.2.0/24")},
			have:        []netlink.Route{ours("10.244.2.0/24", "10.240.0.12")},
			wantReplace: []string{"10.244.2.0/24 via 10.240.0.22 proto 157 metric 0 (b)"},
		},
		{
			name:    "removal, also of a node deleted while down",
			peers:   []Peer{peer("b", "10.240.0.12", "10.244.2.0/24")},
			have:    []netlink.Route{ours("10.244.2.0/24", "10.240.0.12"), ours("10.244.9.0/24", "10.240.0.19")},
			wantDel: []string{"10.244.9.0/24 via 10.240.0.19 proto 157 metric 0"},
		},
		{
			name:    "own CIDR skipped, and an old route to it removed",
			peers:   []Peer{peer("me-before", "10.240.0.11", "10.244.1.0/24")},
			have:    []netlink.Route{ours("10.244.1.0/24", "10.240.0.11")},
			wantDel: []string{"10.244.1.0/24 via 10.240.0.11 proto 157 metric 0"},
		},
		{
			name: "family mismatch and missing IP skipped",
			peers: []Peer{
				peer("dual", "10.240.0.12", "fd00:10:244:2::/64", "10.244.2.0/24"),
				peer("no-ip", "", "10.244.3.0/24"),
				peer("v6-ip", "fd00::13", "10.244.4.0/24"),
			},
			wantReplace: []string{"10.244.2.0/24 via 10.240.0.12 proto 157 metric 0 (dual)"},
		},
		{
			name:  "foreign-protocol routes untouched",
			peers: nil,
			have: []netlink.Route{
				connected,
				dumpedRoute("10.99.0.0/16", "10.240.0.1", unix.RTPROT_STATIC, 0),
				dumpedRoute("10.244.2.0/24", "10.240.0.1", unix.RTPROT_BOOT, 0),
			},
		},
	}
}

// planRoutesConflictCases are the cases of cluster or host state that
// cannot be fully honored, and of leftovers of ours.
func planRoutesConflictCases() []planRoutesCase {
	own6 := netip.MustParsePrefix("fd00:10:244:1::/64")
	return []planRoutesCase{
		{
			name:        "foreign route holding a wanted destination is left and reported",
			peers:       []Peer{peer("b", "10.240.0.12", "10.244.2.0/24"), peer("c", "10.240.0.13", "10.244.3.0/24")},
			have:        []netlink.Route{dumpedRoute("10.244.2.0/24", "10.240.0.1", unix.RTPROT_STATIC, 0)},
			wantReplace: []string{"10.244.3.0/24 via 10.240.0.13 proto 157 metric 0 (c)"},
			wantProblem: []string{"10.244.2.0/24 for node b: destination held by a route of protocol static"},
		},
		{
			name:        "foreign route with another metric does not conflict",
			peers:       []Peer{peer("b", "10.240.0.12", "10.244.2.0/24")},
			have:        []netlink.Route{dumpedRoute("10.244.2.0/24", "10.240.0.1", unix.RTPROT_STATIC, 100)},
			wantReplace: []string{"10.244.2.0/24 via 10.240.0.12 proto 157 metric 0 (b)"},
		},
		{
			name:        "CIDR overlapping our own is reported",
			peers:       []Peer{peer("b", "10.240.0.12", "10.244.0.0/16")},
			wantProblem: []string{"10.244.0.0/16 for node b: overlaps this node's pod CIDR"},
		},
		{
			name:        "CIDR claimed twice: first by name wins",
			peers:       []Peer{peer("y", "10.240.0.13", "10.244.2.0/24"), peer("x", "10.240.0.12", "10.244.2.0/24")},
			wantReplace: []string{"10.244.2.0/24 via 10.240.0.12 proto 157 metric 0 (x)"},
			wantProblem: []string{"for node y: pod CIDR already claimed by node x"},
		},
		{
			name:        "host bits masked",
			peers:       []Peer{peer("b", "10.240.0.12", "10.244.2.7/24")},
			wantReplace: []string{"10.244.2.0/24 via 10.240.0.12 proto 157 metric 0 (b)"},
		},
		{
			name:        "our route with another metric and a duplicate are removed",
			peers:       []Peer{peer("b", "10.240.0.12", "10.244.2.0/24")},
			have:        []netlink.Route{dumpedRoute("10.244.2.0/24", "10.240.0.12", RouteProtocol, 50)},
			wantReplace: []string{"10.244.2.0/24 via 10.240.0.12 proto 157 metric 0 (b)"},
			wantDel:     []string{"10.244.2.0/24 via 10.240.0.12 proto 157 metric 50"},
		},
		{
			name:        "IPv6 uses the kernel's default metric",
			own:         own6,
			peers:       []Peer{peer("b", "fd00:240::12", "fd00:10:244:2::/64", "10.244.2.0/24"), peer("c", "fd00:240::13", "fd00:10:244:3::/64")},
			have:        []netlink.Route{dumpedRoute("fd00:10:244:2::/64", "fd00:240::12", RouteProtocol, 1024)},
			wantReplace: []string{"fd00:10:244:3::/64 via fd00:240::13 proto 157 metric 1024 (c)"},
		},
	}
}

func TestPlanRoutes(t *testing.T) {
	for _, tt := range append(planRoutesCases(), planRoutesConflictCases()...) {
		t.Run(tt.name, func(t *testing.T) {
			own := tt.own
			if !own.IsValid() {
				own = netip.MustParsePrefix("10.244.1.0/24")
			}
			plan := planRoutes(tt.peers, own, tt.have)
			var gotReplace, gotDel []string
			for _, c := range plan.replace {
				if c.route.Table != unix.RT_TABLE_MAIN || c.route.Type != unix.RTN_UNICAST {
					t.Errorf("route %s: table %d type %d, want main unicast", describeRoute(c.route), c.route.Table, c.route.Type)
				}
				gotReplace = append(gotReplace, describeRoute(c.route)+" ("+c.peer+")")
			}
			for _, rt := range plan.del {
				gotDel = append(gotDel, describeRoute(rt))
			}
			if !slices.Equal(gotReplace, tt.wantReplace) {
				t.Errorf("replace = %q\nwant      %q", gotReplace, tt.wantReplace)
			}
			if !slices.Equal(gotDel, tt.wantDel) {
				t.Errorf("del = %q\nwant  %q", gotDel, tt.wantDel)
			}
			if len(plan.problems) != len(tt.wantProblem) {
				t.Fatalf("problems = %v, want %d", plan.problems, len(tt.wantProblem))
			}
			for i, p := range plan.problems {
				if !strings.Contains(p.Error(), tt.wantProblem[i]) {
					t.Errorf("problem %d = %q, want it to contain %q", i, p, tt.wantProblem[i])
				}
			}
		})
	}
}

func TestDesiredMasq(t *testing.T) {
	tests := []struct {
		name    string
		podCIDR string
		nodeIP  string
		peers   []Peer
		want    []string // ranges, "first-last"
	}{
		{
			name: "pods and nodes, adjacent ones merged", podCIDR: "10.244.1.0/24", nodeIP: "10.240.0.11",
			peers: []Peer{peer("c", "10.240.0.14", "10.244.5.0/24"), peer("b", "10.240.0.12", "10.244.2.0/24")},
			want: []string{
				"10.240.0.11-10.240.0.12", "10.240.0.14-10.240.0.14",
				"10.244.1.0-10.244.2.255", "10.244.5.0-10.244.5.255",
			},
		},
		{
			name: "overlapping merged, other family and invalid dropped", podCIDR: "10.244.1.0/24", nodeIP: "10.240.0.11",
			peers: []Peer{
				peer("wide", "fd00::12", "10.244.0.0/16", "fd00:10:244:2::/64"),
				peer("none", ""),
				{Name: "zero", PodCIDRs: []netip.Prefix{{}}},
			},
			want: []string{"10.240.0.11-10.240.0.11", "10.244.0.0-10.244.255.255"},
		},
		{
			name: "IPv6", podCIDR: "fd00:10:244:1::/64", nodeIP: "fd00:240::11",
			peers: []Peer{peer("b", "fd00:240::12", "fd00:10:244:2::/64", "10.244.2.0/24")},
			want: []string{
				"fd00:10:244:1::-fd00:10:244:2:ffff:ffff:ffff:ffff",
				"fd00:240::11-fd00:240::12",
			},
		},
		{
			name: "up to the top address", podCIDR: "10.244.1.0/24", nodeIP: "10.240.0.11",
			peers: []Peer{peer("odd", "255.255.255.254", "255.255.255.255/32")},
			want:  []string{"10.240.0.11-10.240.0.11", "10.244.1.0-10.244.1.255", "255.255.255.254-255.255.255.255"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := desiredMasq(netip.MustParsePrefix(tt.podCIDR), netip.MustParseAddr(tt.nodeIP), tt.peers)
			var got []string
			for _, r := range st.noMasq {
				got = append(got, r.first.String()+"-"+r.last.String())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("ranges = %q\nwant     %q", got, tt.want)
			}
			reordered := slices.Clone(tt.peers)
			slices.Reverse(reordered)
			if other := desiredMasq(st.podCIDR, netip.MustParseAddr(tt.nodeIP), reordered); !other.equal(st) {
				t.Errorf("the order of peers changes the table: %v vs %v", other, st)
			}
		})
	}
}

// describeElements renders set elements as "key" or "key end".
func describeElements(els []nftables.SetElement) []string {
	var out []string
	for _, e := range els {
		a, _ := netip.AddrFromSlice(e.Key)
		s := a.String()
		if e.IntervalEnd {
			s += " end"
		}
		out = append(out, s)
	}
	return out
}

func TestSetElements(t *testing.T) {
	r := func(first, last string) addrRange {
		return addrRange{netip.MustParseAddr(first), netip.MustParseAddr(last)}
	}
	tests := []struct {
		name   string
		ranges []addrRange
		is4    bool
		want   []string
	}{
		{
			name: "IPv4", is4: true,
			ranges: []addrRange{r("10.240.0.11", "10.240.0.12"), r("10.244.1.0", "10.244.1.255")},
			want:   []string{"0.0.0.0 end", "10.240.0.11", "10.240.0.13 end", "10.244.1.0", "10.244.2.0 end"},
		},
		{
			name: "from zero, to the top", is4: true,
			ranges: []addrRange{r("0.0.0.0", "0.255.255.255"), r("255.255.255.0", "255.255.255.255")},
			want:   []string{"0.0.0.0", "1.0.0.0 end", "255.255.255.0"},
		},
		{
			name: "IPv6", is4: false,
			ranges: []addrRange{r("fd00:240::11", "fd00:240::11")},
			want:   []string{":: end", "fd00:240::11", "fd00:240::12 end"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			els := setElements(tt.ranges, tt.is4)
			for _, e := range els {
				if want := map[bool]int{true: 4, false: 16}[tt.is4]; len(e.Key) != want {
					t.Errorf("key %x is %d bytes, want %d", e.Key, len(e.Key), want)
				}
			}
			if got := describeElements(els); !slices.Equal(got, tt.want) {
				t.Errorf("elements = %q\nwant       %q", got, tt.want)
			}
		})
	}
}

func TestNewRoutesValidates(t *testing.T) {
	pfx, addr := netip.MustParsePrefix, netip.MustParseAddr
	tests := []struct {
		name string
		cfg  RoutesConfig
		ok   bool
	}{
		{"ok", RoutesConfig{PodCIDR: pfx("10.244.1.0/24"), NodeIP: addr("10.240.0.11")}, true},
		{"ok IPv6 in a netns", RoutesConfig{PodCIDR: pfx("fd00::/64"), NodeIP: addr("fd01::1"), NetNS: "/run/netns/x"}, true},
		{"no pod CIDR", RoutesConfig{NodeIP: addr("10.240.0.11")}, false},
		{"host bits", RoutesConfig{PodCIDR: pfx("10.244.1.1/24"), NodeIP: addr("10.240.0.11")}, false},
		{"default", RoutesConfig{PodCIDR: pfx("0.0.0.0/0"), NodeIP: addr("10.240.0.11")}, false},
		{"no node IP", RoutesConfig{PodCIDR: pfx("10.244.1.0/24")}, false},
		{"families differ", RoutesConfig{PodCIDR: pfx("fd00::/64"), NodeIP: addr("10.240.0.11")}, false},
		{"relative netns", RoutesConfig{PodCIDR: pfx("10.244.1.0/24"), NodeIP: addr("10.240.0.11"), NetNS: "x"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewRoutes(tt.cfg)
			if (err == nil) != tt.ok {
				t.Fatalf("NewRoutes() error = %v, want ok %v", err, tt.ok)
			}
			if badCIDR := !tt.cfg.PodCIDR.IsValid() || tt.cfg.PodCIDR.Masked() != tt.cfg.PodCIDR || tt.cfg.PodCIDR.Bits() == 0; badCIDR != errors.Is(err, ErrInvalidPodCIDR) {
				t.Errorf("NewRoutes() error = %v; wraps ErrInvalidPodCIDR %v, want %v", err, !badCIDR, badCIDR)
			}
		})
	}
}
