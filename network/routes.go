package network

// Routes make the pod CIDRs of the other nodes reachable without an
// overlay: one route per peer pod CIDR via that peer's InternalIP, which
// works when the nodes share a link (one L2 segment). The routes carry
// RouteProtocol so that a restarted nodelet finds, and an uninstall
// removes, exactly its own. The masquerade rule for traffic leaving the
// cluster is in masq.go; Sync applies both.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Peer is another node of the cluster as the routes need it.
type Peer struct {
	Name     string
	IP       netip.Addr     // the node's InternalIP
	PodCIDRs []netip.Prefix // spec.podCIDRs
}

// RouteProtocol marks the routes the nodelet owns (an unassigned rtnetlink
// protocol number, e.g. 157), so they can be found again after a restart
// and removed at uninstall without touching anyone else's routes.
const RouteProtocol = netlink.RouteProtocol(157)

// dumpRetries bounds the re-reads of a route dump the kernel reports as
// interrupted (the table changed while it was being read).
const dumpRetries = 3

// RoutesConfig configures Routes.
type RoutesConfig struct {
	PodCIDR netip.Prefix // this node's pod CIDR: the masquerade rule's source
	NodeIP  netip.Addr   // this node's InternalIP (never masqueraded to)
	// NetNS is the path of the network namespace to act in (tests); "" means the caller's own.
	NetNS string
	Log   *slog.Logger
}

// Routes keeps the routes to the other nodes' pods and the masquerade rule
// of this node's pods in line with the cluster. One Routes manages one
// address family, PodCIDR's: routes of the other family, even with
// RouteProtocol, are left to another Routes (a dual-stack node runs two).
type Routes struct {
	cfg    RoutesConfig
	log    *slog.Logger
	family int // netlink.FAMILY_V4 or FAMILY_V6

	mu sync.Mutex // serializes Sync; guards the fields below
	// applied is what the last successful nft transaction wrote; nil
	// before the first, so that the first Sync always rewrites the table.
	applied *masqState
	// routeWrites and nftTransactions count the changes Sync sent, so
	// tests can tell that an unchanged cluster costs nothing.
	routeWrites     int
	nftTransactions int
}

// NewRoutes checks cfg and returns a Routes. It touches nothing on the host.
func NewRoutes(cfg RoutesConfig) (*Routes, error) {
	p := cfg.PodCIDR
	if !p.IsValid() || p.Addr().Is4In6() || p.Masked() != p || p.Bits() == 0 {
		return nil, fmt.Errorf("%w %s for routes: want a masked, non-default IPv4 or IPv6 prefix", ErrInvalidPodCIDR, p)
	}
	cfg.NodeIP = cfg.NodeIP.Unmap()
	if !cfg.NodeIP.IsValid() || cfg.NodeIP.Is4() != cfg.PodCIDR.Addr().Is4() {
		return nil, fmt.Errorf("network: node IP %s for routes is not an address of the family of pod CIDR %s", cfg.NodeIP, cfg.PodCIDR)
	}
	if cfg.NetNS != "" && !filepath.IsAbs(cfg.NetNS) {
		return nil, fmt.Errorf("network: routes netns %q is not an absolute path", cfg.NetNS)
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	family := netlink.FAMILY_V4
	if cfg.PodCIDR.Addr().Is6() {
		family = netlink.FAMILY_V6
	}
	return &Routes{cfg: cfg, log: cfg.Log.With("component", "routes"), family: family}, nil
}

// Sync makes the host's routes and masquerade rule match peers (the other
// nodes; the caller excludes this node). Idempotent and cheap when nothing
// changed: no netlink writes, and no nft transaction when the desired
// state equals what the last one wrote. A peer whose route the kernel
// refuses does not keep the others from theirs: Sync applies all it can
// and returns every failure, each naming its peer.
func (r *Routes) Sync(ctx context.Context, peers []Peer) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sync routes: %w", err)
	}
	h, nft, done, err := openNetNS(r.cfg.NetNS)
	if err != nil {
		return err
	}
	defer done()

	var errs []error
	have, err := listRoutes(h, r.family, unix.RT_TABLE_MAIN)
	if err != nil {
		errs = append(errs, err)
	} else {
		plan := planRoutes(peers, r.cfg.PodCIDR, have)
		errs = append(errs, plan.problems...)
		errs = append(errs, r.applyRoutes(h, plan)...)
	}
	if err := ctx.Err(); err != nil {
		return errors.Join(append(errs, fmt.Errorf("sync masquerade: %w", err))...)
	}
	if err := r.syncMasq(nft, peers); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// applyRoutes carries out plan, going on past failures.
func (r *Routes) applyRoutes(h *netlink.Handle, plan routePlan) []error {
	var errs []error
	for _, c := range plan.replace {
		r.routeWrites++
		if err := h.RouteReplace(&c.route); err != nil {
			errs = append(errs, fmt.Errorf("replace route to %s via %s for node %s: %w", c.route.Dst, c.route.Gw, c.peer, err))
			continue
		}
		r.log.Info("route to node's pods set", "node", c.peer, "dst", c.route.Dst, "via", c.route.Gw)
	}
	for _, rt := range plan.del {
		r.routeWrites++
		if err := h.RouteDel(&rt); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("delete route to %s via %s: %w", rt.Dst, rt.Gw, err))
			continue
		}
		r.log.Info("route to the pods of a departed node removed", "dst", rt.Dst, "via", rt.Gw)
	}
	return errs
}

// routeChange is a route to set and the peer it is for (for errors).
type routeChange struct {
	peer  string
	route netlink.Route
}

// routePlan is what Sync must do to the routes; problems are peers' pod
// CIDRs that cannot get a route, reported without stopping the rest.
type routePlan struct {
	replace  []routeChange
	del      []netlink.Route
	problems []error
}

// wantedRoute is the route one pod CIDR should have.
type wantedRoute struct {
	peer string
	gw   netip.Addr
}

// planRoutes compares the routes peers need with have, the main table's
// routes of one family. Only routes with RouteProtocol are ever replaced
// or deleted; a pod CIDR whose destination another protocol's route holds
// is left to it and reported, since replacing would overwrite that route.
// Routes to own, this node's pod CIDR, or into it, are never planned.
// The result is sorted by destination, so it is deterministic.
func planRoutes(want []Peer, own netip.Prefix, have []netlink.Route) routePlan {
	var plan routePlan
	wanted := map[netip.Prefix]wantedRoute{}
	for _, p := range slices.SortedFunc(slices.Values(want), func(a, b Peer) int { return strings.Compare(a.Name, b.Name) }) {
		ip := p.IP.Unmap()
		if !ip.IsValid() {
			continue // no InternalIP yet: nothing to route through
		}
		for _, c := range p.PodCIDRs {
			if !c.IsValid() || c.Addr().Is4() != ip.Is4() || c.Addr().Is4() != own.Addr().Is4() {
				continue // the other family of a dual-stack node, or nonsense
			}
			c = c.Masked()
			switch w, dup := wanted[c]; {
			case c == own:
				continue
			case c.Overlaps(own):
				plan.problems = append(plan.problems, fmt.Errorf("route to %s for node %s: overlaps this node's pod CIDR %s", c, p.Name, own))
			case dup:
				plan.problems = append(plan.problems, fmt.Errorf("route to %s for node %s: pod CIDR already claimed by node %s", c, p.Name, w.peer))
			default:
				wanted[c] = wantedRoute{peer: p.Name, gw: ip}
			}
		}
	}
	metric := ownMetric(own.Addr())
	satisfied := map[netip.Prefix]bool{}
	for _, rt := range have {
		dst, ok := routeDst(rt)
		w, isWanted := wanted[dst]
		switch {
		case !ok:
			continue
		case rt.Protocol != RouteProtocol:
			if isWanted && rt.Priority == metric {
				plan.problems = append(plan.problems, fmt.Errorf("route to %s for node %s: destination held by a route of protocol %s, left alone", dst, w.peer, rt.Protocol))
				delete(wanted, dst)
			}
		case !isWanted || rt.Priority != metric || satisfied[dst]:
			plan.del = append(plan.del, rt) // unwanted, or a duplicate we never add
		case routeGw(rt) == w.gw && len(rt.MultiPath) == 0:
			satisfied[dst] = true
		}
		// A route of ours to a wanted destination via another gateway is
		// overwritten in place by the replace below: no moment without one.
	}
	for dst, w := range wanted {
		if !satisfied[dst] {
			plan.replace = append(plan.replace, routeChange{peer: w.peer, route: ownRoute(dst, w.gw)})
		}
	}
	slices.SortFunc(plan.replace, func(a, b routeChange) int { return cmpRouteDst(a.route, b.route) })
	slices.SortFunc(plan.del, cmpRouteDst)
	return plan
}

// ownMetric is the metric of the nodelet's routes: the kernel's default,
// spelled out because the kernel reports an IPv6 route added without one
// with 1024 (IP6_RT_PRIO_USER), and the plan compares what it reads back.
func ownMetric(a netip.Addr) int {
	if a.Is6() {
		return 1024
	}
	return 0
}

// ownRoute is the route the nodelet sets for dst via gw.
func ownRoute(dst netip.Prefix, gw netip.Addr) netlink.Route {
	return netlink.Route{
		Priority: ownMetric(dst.Addr()),
		Dst:      &net.IPNet{IP: dst.Addr().AsSlice(), Mask: net.CIDRMask(dst.Bits(), dst.Addr().BitLen())},
		Gw:       gw.AsSlice(),
		Protocol: RouteProtocol,
		Table:    unix.RT_TABLE_MAIN,
		Scope:    netlink.SCOPE_UNIVERSE,
		Type:     unix.RTN_UNICAST,
	}
}

// routeDst is rt's destination; false for a default route (nil Dst), which
// is never one of ours.
func routeDst(rt netlink.Route) (netip.Prefix, bool) {
	if rt.Dst == nil {
		return netip.Prefix{}, false
	}
	addr, ok := netip.AddrFromSlice(rt.Dst.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, bits := rt.Dst.Mask.Size()
	addr = addr.Unmap()
	if bits != addr.BitLen() {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(addr, ones).Masked(), true
}

func routeGw(rt netlink.Route) netip.Addr {
	addr, _ := netip.AddrFromSlice(rt.Gw)
	return addr.Unmap()
}

func cmpRouteDst(a, b netlink.Route) int {
	pa, _ := routeDst(a)
	pb, _ := routeDst(b)
	if c := pa.Addr().Compare(pb.Addr()); c != 0 {
		return c
	}
	if c := pa.Bits() - pb.Bits(); c != 0 {
		return c
	}
	return int(a.Priority) - int(b.Priority)
}

// listRoutes dumps the routes of family in table (RT_TABLE_UNSPEC: all
// tables), re-reading a dump the kernel reports as interrupted.
func listRoutes(h *netlink.Handle, family, table int) ([]netlink.Route, error) {
	filter := &netlink.Route{Table: table}
	var err error
	for range dumpRetries {
		var rts []netlink.Route
		rts, err = h.RouteListFiltered(family, filter, netlink.RT_FILTER_TABLE)
		if err == nil {
			return rts, nil
		}
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
	}
	return nil, fmt.Errorf("list routes of table %d: %w", table, err)
}

// openNetNS returns a route handle and an nftables connection acting in
// the netns at path ("" = the caller's), and the function releasing them.
func openNetNS(path string) (*netlink.Handle, *nftables.Conn, func(), error) {
	if path == "" {
		h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("open route netlink: %w", err)
		}
		nft, err := nftables.New()
		if err != nil {
			h.Close()
			return nil, nil, nil, fmt.Errorf("open nftables netlink: %w", err)
		}
		return h, nft, h.Close, nil
	}
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("open netns %s: %w", path, err)
	}
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		ns.Close()
		return nil, nil, nil, fmt.Errorf("open route netlink in netns %s: %w", path, err)
	}
	// The connection is not lasting: it dials per operation, with the
	// netns fd, which must therefore stay open until done.
	nft, err := nftables.New(nftables.WithNetNSFd(int(ns)))
	if err != nil {
		h.Close()
		ns.Close()
		return nil, nil, nil, fmt.Errorf("open nftables netlink in netns %s: %w", path, err)
	}
	return h, nft, func() { h.Close(); ns.Close() }, nil
}

// Cleanup removes every route with RouteProtocol, of both families and in
// every table, and the nodelet's nft tables, in the namespace at netnsPath
// ("" = the caller's). For uninstall. Not-found is success.
func Cleanup(netnsPath string) error {
	h, nft, done, err := openNetNS(netnsPath)
	if err != nil {
		return err
	}
	defer done()
	var errs []error
	rts, err := listRoutes(h, netlink.FAMILY_ALL, unix.RT_TABLE_UNSPEC)
	if err != nil {
		errs = append(errs, err)
	}
	for _, rt := range rts {
		if rt.Protocol != RouteProtocol {
			continue
		}
		if err := h.RouteDel(&rt); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("delete route to %s via %s: %w", rt.Dst, rt.Gw, err))
		}
	}
	if err := deleteMasqTables(nft); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
