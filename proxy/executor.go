package proxy

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/google/nftables"
	mnetlink "github.com/mdlayher/netlink"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// RouteProtocol marks the proxy's routes to ClusterIPs (network.Routes
// uses 157 for its routes to other nodes' pod CIDRs).
const RouteProtocol netlink.RouteProtocol = 158

// Executor writes plans into a network namespace: the nft table of the
// plan's family and a route per ClusterIP. Not safe for concurrent use.
//
// Why the routes: a connection the node opens itself is routed before the
// nat output hook can DNAT it, so a ClusterIP without any route fails at
// connect() with "network unreachable" on a host (or a test node) that has
// no default route. Each ClusterIP gets a link-scope /32 (/128) route on
// the interface that holds the node's IP, with that IP as source; the
// DNAT then reroutes to the endpoint. With a default route they change
// nothing that matters: the DNAT'd packet is routed again anyway.
type Executor struct {
	nft  *nftables.Conn
	nl   *netlink.Handle
	done func()
	log  *slog.Logger
	// sctpBroken: the kernel refused the table with SCTP rules once;
	// they are left out from then on.
	sctpBroken bool
	// applied is the plan in the table (nil: unknown, rewrite it all);
	// lastFull the time of the last full rewrite; routeSrc the source of
	// the routes last synced.
	applied  *Plan
	lastFull time.Time
	routeSrc netip.Addr
	// fullWrites and partialWrites count the transactions of each kind.
	fullWrites, partialWrites int
}

// NewExecutor opens netlink in the namespace at netnsPath ("" = the
// caller's).
func NewExecutor(netnsPath string, log *slog.Logger) (*Executor, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if netnsPath == "" {
		h, err := netlink.NewHandle(unix.NETLINK_ROUTE, unix.NETLINK_NETFILTER)
		if err != nil {
			return nil, fmt.Errorf("proxy: open route netlink: %w", err)
		}
		nft, err := nftables.New(nftables.WithSockOptions(bigSendBuffer))
		if err != nil {
			h.Close()
			return nil, fmt.Errorf("proxy: open nftables netlink: %w", err)
		}
		return &Executor{nft: nft, nl: h, done: h.Close, log: log}, nil
	}
	ns, err := netns.GetFromPath(netnsPath)
	if err != nil {
		return nil, fmt.Errorf("proxy: open netns %s: %w", netnsPath, err)
	}
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE, unix.NETLINK_NETFILTER)
	if err != nil {
		ns.Close()
		return nil, fmt.Errorf("proxy: open route netlink in netns %s: %w", netnsPath, err)
	}
	// nftables dials per operation with the netns fd: keep it open.
	nft, err := nftables.New(nftables.WithNetNSFd(int(ns)), nftables.WithSockOptions(bigSendBuffer))
	if err != nil {
		h.Close()
		ns.Close()
		return nil, fmt.Errorf("proxy: open nftables netlink in netns %s: %w", netnsPath, err)
	}
	return &Executor{nft: nft, nl: h, done: func() { h.Close(); ns.Close() }, log: log}, nil
}

// Close releases the netlink handles; the table and routes stay.
func (e *Executor) Close() { e.done() }

// fullSyncPeriod: at most this long between two full rewrites of the
// table (repairing whatever else changed it); syncs in between write only
// what differs from the last plan written, as upstream's partial syncs.
const fullSyncPeriod = time.Hour

// Apply brings the table of p's family to p in one transaction: a full
// rewrite the first time (replacing a previous process's table
// atomically), after an error and every fullSyncPeriod; else only the
// chains that changed, or nothing for an unchanged plan. Then it brings
// the ClusterIP routes in line (routeSrc: the node IP whose interface
// carries them; invalid: no routes are managed).
func (e *Executor) Apply(p Plan, routeSrc netip.Addr) error {
	if e.sctpBroken {
		p = withoutSCTP(p)
	}
	full := e.applied == nil || e.applied.Is6 != p.Is6 || e.applied.PodCIDR != p.PodCIDR || time.Since(e.lastFull) > fullSyncPeriod
	var err error
	switch {
	case full:
		err = writeTable(e.nft, p)
		if err != nil && !e.sctpBroken && slices.ContainsFunc(p.Rules, func(r Rule) bool { return r.Protocol == SCTP }) {
			// Kernels without SCTP NAT refuse the whole batch: retry without.
			if err2 := writeTable(e.nft, withoutSCTP(p)); err2 == nil {
				e.log.Warn("SCTP services are not proxied: the kernel refused their rules", "err", err)
				e.sctpBroken, err, p = true, nil, withoutSCTP(p)
			}
		}
		if err == nil {
			e.lastFull = time.Now()
			e.fullWrites++
		}
	case e.applied.PodCIDR == p.PodCIDR && slices.Equal(e.applied.Rules, p.Rules) &&
		slices.EqualFunc(e.applied.Targets, p.Targets, Target.equal):
		// Unchanged.
	default:
		if err = updateTable(e.nft, *e.applied, p); err != nil {
			e.log.Warn("partial sync failed; rewriting the table", "err", err)
			if err = writeTable(e.nft, p); err == nil {
				e.lastFull = time.Now()
				e.fullWrites++
			}
		} else {
			e.partialWrites++
		}
	}
	if err != nil {
		e.applied = nil
		return fmt.Errorf("proxy: write nft table %s: %w", TableName, err)
	}
	routesChanged := full || !slices.Equal(e.applied.RouteIPs, p.RouteIPs) || routeSrc != e.routeSrc
	if e.applied != nil {
		e.clearStaleUDP(*e.applied, p)
	}
	e.applied = &p
	if routeSrc.IsValid() && routeSrc.Is6() == p.Is6 && routesChanged {
		if err := e.syncRoutes(p.RouteIPs, routeSrc); err != nil {
			e.routeSrc = netip.Addr{} // try again next time
			return fmt.Errorf("proxy: %w", err)
		}
		e.routeSrc = routeSrc
	}
	return nil
}

// syncRoutes keeps exactly one RouteProtocol route per ip of the family,
// on src's interface.
func (e *Executor) syncRoutes(ips []netip.Addr, src netip.Addr) error {
	link, err := e.linkOf(src)
	if err != nil {
		return err
	}
	fam := netlink.FAMILY_V4
	if src.Is6() {
		fam = netlink.FAMILY_V6
	}
	have, err := e.nl.RouteListFiltered(fam, &netlink.Route{Protocol: RouteProtocol, Table: unix.RT_TABLE_MAIN},
		netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TABLE)
	if err != nil {
		return fmt.Errorf("list routes: %w", err)
	}
	want := map[netip.Addr]bool{}
	for _, ip := range ips {
		want[ip] = true
	}
	var errs []error
	for _, rt := range have {
		ip, ok := routeDst(rt)
		if ok && want[ip] && rt.LinkIndex == link && srcOf(rt) == src {
			delete(want, ip)
			continue
		}
		if err := e.nl.RouteDel(&rt); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("delete route %s: %w", rt.Dst, err))
		}
	}
	for ip := range want {
		rt := &netlink.Route{LinkIndex: link, Dst: prefixNet(ip), Src: src.AsSlice(), Scope: netlink.SCOPE_LINK,
			Protocol: RouteProtocol, Table: unix.RT_TABLE_MAIN}
		if err := e.nl.RouteReplace(rt); err != nil {
			errs = append(errs, fmt.Errorf("add route %s: %w", ip, err))
		}
	}
	return errors.Join(errs...)
}

func (e *Executor) linkOf(src netip.Addr) (int, error) {
	addrs, err := e.nl.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return 0, fmt.Errorf("list addresses: %w", err)
	}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok && ip.Unmap() == src {
			return a.LinkIndex, nil
		}
	}
	return 0, fmt.Errorf("no interface has the node IP %s", src)
}

func routeDst(rt netlink.Route) (netip.Addr, bool) {
	if rt.Dst == nil {
		return netip.Addr{}, false
	}
	ones, bits := rt.Dst.Mask.Size()
	ip, ok := netip.AddrFromSlice(rt.Dst.IP)
	if !ok || ones != bits {
		return netip.Addr{}, false
	}
	return ip.Unmap(), true
}

// Cleanup removes the proxy's nft tables of both families and its routes
// in the namespace at netnsPath ("" = the caller's). For uninstall
// (`nodelet cleanup-network`); not-found is success.
func Cleanup(netnsPath string) error {
	e, err := NewExecutor(netnsPath, nil)
	if err != nil {
		return err
	}
	defer e.Close()
	var errs []error
	if err := deleteTables(e.nft); err != nil {
		errs = append(errs, err)
	}
	rts, err := e.nl.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Protocol: RouteProtocol, Table: unix.RT_TABLE_MAIN},
		netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TABLE)
	if err != nil {
		errs = append(errs, fmt.Errorf("list routes: %w", err))
	}
	for _, rt := range rts {
		if err := e.nl.RouteDel(&rt); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("delete route %s: %w", rt.Dst, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("proxy cleanup: %w", err)
	}
	return nil
}

func srcOf(rt netlink.Route) netip.Addr {
	a, _ := netip.AddrFromSlice(rt.Src)
	return a.Unmap()
}

// prefixNet is ip as a host route's destination.
func prefixNet(ip netip.Addr) *net.IPNet {
	return &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(ip.BitLen(), ip.BitLen())}
}

// sendBufferBytes bounds one transaction: the whole batch goes in one
// sendmsg, which netlink refuses beyond the socket's send buffer (about
// 200 KB by default; 1,000 services of 10 endpoints take some 8 MB).
const (
	sendBufferBytes = 256 << 20
	recvBufferBytes = 64 << 20
)

// bigSendBuffer raises the send buffer as nft(8) does for big batches:
// SO_SNDBUFFORCE (CAP_NET_ADMIN, which writing nftables needs anyway),
// else SO_SNDBUF within net.core.wmem_max. The buffer is a limit, not an
// allocation.
func bigSendBuffer(c *mnetlink.Conn) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	// Every message of the batch is acknowledged: cap the acks to their
	// headers and make room for them too.
	if err := c.SetOption(mnetlink.CapAcknowledge, true); err != nil {
		return err
	}
	var sndErr, rcvErr error
	if err := raw.Control(func(fd uintptr) {
		sndErr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, sendBufferBytes)
		rcvErr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, recvBufferBytes)
	}); err != nil {
		return err
	}
	if sndErr != nil {
		if err := c.SetWriteBuffer(sendBufferBytes); err != nil {
			return err
		}
	}
	if rcvErr != nil {
		return c.SetReadBuffer(recvBufferBytes)
	}
	return nil
}

// clearStaleUDP deletes the conntrack entries of UDP flows DNATed to an
// endpoint that old had and p no longer has for the same service address:
// UDP has no connection to end, so without this a client that keeps its
// socket keeps sending to the gone endpoint until the entry times out
// (upstream's kube-proxy does the same). Failures are logged only.
func (e *Executor) clearStaleUDP(old, p Plan) {
	eps := func(pl Plan) map[string][]netip.AddrPort {
		m := map[string][]netip.AddrPort{}
		for _, t := range pl.Targets {
			m[t.Name] = t.Endpoints
		}
		return m
	}
	oldEPs, newEPs := eps(old), eps(p)
	newTarget := map[[2]any]string{}
	for _, r := range p.Rules {
		if r.Protocol == UDP && r.Action == DNAT {
			newTarget[[2]any{r.Dst, r.Port}] = r.Target
		}
	}
	fam := netlink.FAMILY_V4
	if p.Is6 {
		fam = netlink.FAMILY_V6
	}
	var filters []netlink.CustomConntrackFilter
	for _, r := range old.Rules {
		if r.Protocol != UDP || r.Action != DNAT {
			continue
		}
		still := newEPs[newTarget[[2]any{r.Dst, r.Port}]]
		for _, ep := range oldEPs[r.Target] {
			if slices.Contains(still, ep) {
				continue
			}
			f := &netlink.ConntrackFilter{}
			err := errors.Join(f.AddProtocol(unix.IPPROTO_UDP),
				f.AddIP(netlink.ConntrackOrigDstIP, r.Dst.AsSlice()),
				f.AddPort(netlink.ConntrackOrigDstPort, r.Port),
				f.AddIP(netlink.ConntrackReplySrcIP, ep.Addr().AsSlice()))
			if err != nil {
				e.log.Warn("conntrack filter", "err", err)
				continue
			}
			filters = append(filters, f)
		}
	}
	if len(filters) == 0 {
		return
	}
	n, err := e.nl.ConntrackDeleteFilters(netlink.ConntrackTable, netlink.InetFamily(fam), filters...)
	if err != nil {
		e.log.Warn("delete stale UDP conntrack entries", "err", err)
		return
	}
	if n > 0 {
		e.log.Info("deleted stale UDP conntrack entries", "entries", n)
	}
}
