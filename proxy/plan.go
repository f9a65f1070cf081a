// Package proxy is the nodelet's Service data plane: informers on
// Services, EndpointSlices and the node's own addresses feed a pure
// planner (Compute: what each service port does with which packets), and
// an executor writes the plan as one nftables table per family (table
// ip/ip6 nodelet-services) in one netlink transaction per change. The
// semantics are those of upstream kube-proxy's nftables mode: ClusterIP,
// NodePort and external IPs DNAT to ready endpoints chosen by
// `numgen random`, ClientIP session affinity through a dynamic set with a
// timeout, the Local traffic policies, REJECT for services without
// endpoints, and a masquerade mark for traffic that needs SNAT.
package proxy

import (
	"cmp"
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// Protocol is a service port's L4 protocol.
type Protocol string

const (
	TCP  Protocol = "TCP"
	UDP  Protocol = "UDP"
	SCTP Protocol = "SCTP"
)

// Action is what a matched packet meets.
type Action int

const (
	// DNAT sends the packet to one of the Target's endpoints.
	DNAT Action = iota
	// Reject answers with a TCP reset or ICMP port unreachable: the
	// service has no endpoint at all.
	Reject
	// Drop discards the packet: the service has endpoints, but none the
	// traffic policy allows here (Local policies).
	Drop
)

func (a Action) String() string {
	switch a {
	case DNAT:
		return "dnat"
	case Reject:
		return "reject"
	case Drop:
		return "drop"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Options are the node's side of the plan.
type Options struct {
	NodeName string
	// NodeIPs are the addresses NodePorts answer on.
	NodeIPs []netip.Addr
	// PodCIDR is this node's pod range: ClusterIP traffic from it keeps
	// its source address, traffic from anywhere else (the node itself,
	// other hosts) is masqueraded.
	PodCIDR netip.Prefix
	// SkipClusterIPs are service IPs the proxy leaves alone: the cluster
	// DNS addresses the nodelet serves itself on each node.
	SkipClusterIPs []netip.Addr
	// Is6 selects the IPv6 plan; the planner keeps only addresses of the
	// family.
	Is6 bool
}

// Plan is the desired content of one family's table.
type Plan struct {
	Is6 bool
	// PodCIDR: see Options (invalid if not of the family).
	PodCIDR netip.Prefix
	// Rules are sorted by Service, then Kind, then Dst. DNAT rules are the
	// nat dispatch; Reject and Drop rules are filter checks made before
	// any DNAT could match.
	Rules []Rule
	// Targets are the endpoint groups DNAT rules name, by Name.
	Targets []Target
	// RouteIPs are the ClusterIPs that need a route on the node for its
	// own connections' routing decision (before the nat output hook).
	RouteIPs []netip.Addr
}

// Kind says which address of a service a rule matches.
type Kind string

const (
	KindClusterIP  Kind = "ClusterIP"
	KindExternalIP Kind = "ExternalIP"
	KindLBIngress  Kind = "LoadBalancer"
	KindNodePort   Kind = "NodePort"
)

// Rule matches packets to Dst:Port/Protocol (for a NodePort, to each of
// the node's IPs).
type Rule struct {
	Service  string // namespace/name:portName
	Kind     Kind
	Dst      netip.Addr
	Protocol Protocol
	Port     uint16
	Action   Action
	// Target names the endpoint group of a DNAT rule.
	Target string
	// Masquerade marks the connection for SNAT in postrouting: traffic
	// not from this node's pods (ClusterIP), and external traffic with
	// the Cluster policy.
	Masquerade bool
	// MasqueradeUnlessFromPods limits Masquerade to sources outside the
	// pod CIDR (ClusterIP rules).
	MasqueradeUnlessFromPods bool
}

// Target is one group of endpoints of a service port, with its affinity.
type Target struct {
	Name      string // the chain's name: "svc-" + hash, or "ext-" + hash
	Service   string
	Protocol  Protocol
	Endpoints []netip.AddrPort // sorted
	// Affinity > 0: ClientIP session affinity with this timeout.
	Affinity time.Duration
}

// Compute is the plan for services and slices on this node: pure, so
// that every rule can be tested as data.
func Compute(services []*corev1.Service, endpointSlices []*discoveryv1.EndpointSlice, o Options) Plan {
	p := Plan{Is6: o.Is6}
	if o.PodCIDR.IsValid() && o.PodCIDR.Addr().Is6() == o.Is6 {
		p.PodCIDR = o.PodCIDR.Masked()
	}
	fam := func(a netip.Addr) bool { return a.IsValid() && a.Unmap().Is6() == o.Is6 }
	addrType := discoveryv1.AddressTypeIPv4
	if o.Is6 {
		addrType = discoveryv1.AddressTypeIPv6
	}
	bySvc := map[string][]*discoveryv1.EndpointSlice{}
	for _, s := range endpointSlices {
		name := s.Labels[discoveryv1.LabelServiceName]
		if name == "" || s.AddressType != addrType {
			continue
		}
		key := s.Namespace + "/" + name
		bySvc[key] = append(bySvc[key], s)
	}
	var nodeIPs []netip.Addr
	for _, a := range o.NodeIPs {
		if fam(a) {
			nodeIPs = append(nodeIPs, a.Unmap())
		}
	}
	slices.SortFunc(nodeIPs, netip.Addr.Compare)
	nodeIPs = slices.Compact(nodeIPs)
	for _, svc := range services {
		if svc.Spec.Type == corev1.ServiceTypeExternalName {
			continue
		}
		a := serviceAddrs(svc, fam, o.SkipClusterIPs)
		key := svc.Namespace + "/" + svc.Name
		for _, sp := range svc.Spec.Ports {
			planPort(&p, svc, sp, a, nodeIPs, bySvc[key], o.NodeName)
		}
	}
	slices.SortFunc(p.Rules, func(a, b Rule) int {
		return cmp.Or(strings.Compare(a.Service, b.Service), strings.Compare(string(a.Kind), string(b.Kind)),
			a.Dst.Compare(b.Dst), cmp.Compare(a.Port, b.Port), strings.Compare(string(a.Protocol), string(b.Protocol)))
	})
	p.Rules = dedupe(p.Rules)
	// Targets no DNAT rule names (a service without any address of the
	// family, or whose only address another service took) are left out.
	used := map[string]bool{}
	for _, r := range p.Rules {
		used[r.Target] = true
	}
	p.Targets = slices.DeleteFunc(p.Targets, func(t Target) bool { return !used[t.Name] })
	slices.SortFunc(p.Targets, func(a, b Target) int { return strings.Compare(a.Name, b.Name) })
	p.Targets = slices.CompactFunc(p.Targets, func(a, b Target) bool { return a.Name == b.Name })
	routes := map[netip.Addr]bool{}
	for _, r := range p.Rules {
		if r.Kind == KindClusterIP {
			routes[r.Dst] = true
		}
	}
	for ip := range routes {
		p.RouteIPs = append(p.RouteIPs, ip)
	}
	slices.SortFunc(p.RouteIPs, netip.Addr.Compare)
	return p
}

// dedupe keeps one rule per (address, protocol, port), the first in
// order: two services claiming one external IP and port (a user's
// mistake) must not make the kernel refuse the whole transaction.
func dedupe(rules []Rule) []Rule {
	type k struct {
		dst   netip.Addr
		proto Protocol
		port  uint16
	}
	seen := map[k]bool{}
	return slices.DeleteFunc(rules, func(r Rule) bool {
		key := k{r.Dst, r.Protocol, r.Port}
		if seen[key] {
			return true
		}
		seen[key] = true
		return false
	})
}

// addrs are a service's addresses of the plan's family.
type addrs struct {
	cluster, external, lbIngress []netip.Addr
}

func serviceAddrs(svc *corev1.Service, fam func(netip.Addr) bool, skip []netip.Addr) addrs {
	var a addrs
	for _, s := range clusterIPStrings(svc) {
		ip, err := netip.ParseAddr(s)
		if err != nil || !fam(ip) || slices.Contains(skip, ip.Unmap()) {
			continue
		}
		a.cluster = append(a.cluster, ip.Unmap())
	}
	for _, s := range svc.Spec.ExternalIPs {
		if ip, err := netip.ParseAddr(s); err == nil && fam(ip) {
			a.external = append(a.external, ip.Unmap())
		}
	}
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if ip, err := netip.ParseAddr(ing.IP); err == nil && fam(ip) {
			a.lbIngress = append(a.lbIngress, ip.Unmap())
		}
	}
	return a
}

// planPort adds the rules and targets of one service port.
func planPort(p *Plan, svc *corev1.Service, sp corev1.ServicePort, a addrs, nodeIPs []netip.Addr, ss []*discoveryv1.EndpointSlice, node string) {
	proto := Protocol(sp.Protocol)
	if proto == "" {
		proto = TCP
	}
	name := svc.Namespace + "/" + svc.Name + ":" + sp.Name
	clusterEPs, externalEPs, anyEP := categorize(endpointsFor(ss, sp, proto), svc, node)
	var affinity time.Duration
	if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		affinity = 10800 * time.Second // upstream's default
		if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			affinity = time.Duration(*c.ClientIP.TimeoutSeconds) * time.Second
		}
	}
	clusterTarget := addTarget(p, "svc", name, proto, clusterEPs, affinity)
	externalTarget := clusterTarget
	if !slices.Equal(clusterEPs, externalEPs) {
		externalTarget = addTarget(p, "ext", name, proto, externalEPs, affinity)
	}
	externalLocal := svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	add := func(kind Kind, ip netip.Addr, port uint16, target string, usable int, masq, unlessPods bool) {
		r := Rule{Service: name, Kind: kind, Dst: ip, Protocol: proto, Port: port}
		switch {
		case usable > 0:
			r.Action, r.Target, r.Masquerade, r.MasqueradeUnlessFromPods = DNAT, target, masq, unlessPods
		case anyEP:
			r.Action = Drop // endpoints exist, none the policy allows here
		default:
			r.Action = Reject
		}
		p.Rules = append(p.Rules, r)
	}
	port := uint16(sp.Port)
	for _, ip := range a.cluster {
		add(KindClusterIP, ip, port, clusterTarget, len(clusterEPs), true, true)
	}
	for _, ip := range a.external {
		add(KindExternalIP, ip, port, externalTarget, len(externalEPs), !externalLocal, false)
	}
	for _, ip := range a.lbIngress {
		add(KindLBIngress, ip, port, externalTarget, len(externalEPs), !externalLocal, false)
	}
	if sp.NodePort != 0 && (svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer) {
		for _, ip := range nodeIPs {
			add(KindNodePort, ip, uint16(sp.NodePort), externalTarget, len(externalEPs), !externalLocal, false)
		}
	}
}

func clusterIPStrings(svc *corev1.Service) []string {
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	if len(ips) > 0 && ips[0] == corev1.ClusterIPNone {
		return nil
	}
	return ips
}

// endpoint is one address:port of a service port with its conditions.
type endpoint struct {
	addr                        netip.AddrPort
	ready, serving, terminating bool
	local                       bool // on this node
	nodeName                    string
}

// endpointsFor are the endpoints of the slices that serve sp: the slice
// port with sp's name and protocol gives the port number.
func endpointsFor(ss []*discoveryv1.EndpointSlice, sp corev1.ServicePort, proto Protocol) []endpoint {
	seen := map[netip.AddrPort]bool{}
	var out []endpoint
	for _, s := range ss {
		var port int32 = -1
		for _, p := range s.Ports {
			pname, pproto := "", corev1.ProtocolTCP
			if p.Name != nil {
				pname = *p.Name
			}
			if p.Protocol != nil {
				pproto = *p.Protocol
			}
			if pname == sp.Name && Protocol(pproto) == proto && p.Port != nil {
				port = *p.Port
				break
			}
		}
		if port <= 0 || port > 65535 {
			continue
		}
		for _, e := range s.Endpoints {
			if len(e.Addresses) == 0 {
				continue
			}
			a, err := netip.ParseAddr(e.Addresses[0])
			if err != nil {
				continue
			}
			ap := netip.AddrPortFrom(a.Unmap(), uint16(port))
			if seen[ap] {
				continue
			}
			seen[ap] = true
			c := e.Conditions
			ep := endpoint{addr: ap,
				ready:       c.Ready == nil || *c.Ready, // nil means ready (API semantics)
				serving:     c.Serving != nil && *c.Serving,
				terminating: c.Terminating != nil && *c.Terminating,
			}
			if c.Serving == nil {
				ep.serving = ep.ready
			}
			if e.NodeName != nil {
				ep.nodeName = *e.NodeName
			}
			out = append(out, ep)
		}
	}
	return out
}

// categorize picks, as upstream's CategorizeEndpoints, the endpoints for
// traffic from inside the cluster and for external traffic: ready ones;
// when none is ready, the serving and terminating ones. The Local
// policies keep only this node's. any reports whether the service port has
// any usable endpoint anywhere (Drop rather than Reject).
func categorize(eps []endpoint, svc *corev1.Service, node string) (cluster, external []netip.AddrPort, anyEP bool) {
	for i := range eps {
		eps[i].local = node != "" && eps[i].nodeName == node
	}
	pick := func(localOnly bool) []netip.AddrPort {
		var ready, fallback []netip.AddrPort
		for _, e := range eps {
			if localOnly && !e.local {
				continue
			}
			if e.ready {
				ready = append(ready, e.addr)
			} else if e.serving && e.terminating {
				fallback = append(fallback, e.addr)
			}
		}
		if len(ready) == 0 {
			ready = fallback
		}
		slices.SortFunc(ready, netip.AddrPort.Compare)
		return ready
	}
	all := pick(false)
	anyEP = len(all) > 0
	cluster = all
	if p := svc.Spec.InternalTrafficPolicy; p != nil && *p == corev1.ServiceInternalTrafficPolicyLocal {
		cluster = pick(true)
	}
	external = all
	if svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
		external = pick(true)
	}
	return cluster, external, anyEP
}

// addTarget adds the endpoint group of a service port and returns its
// name, which is stable for the same service port, protocol and group
// kind: the chain keeps its name across syncs.
func addTarget(p *Plan, kind, svcPort string, proto Protocol, eps []netip.AddrPort, affinity time.Duration) string {
	name := targetName(kind, svcPort, proto)
	if len(eps) > 0 {
		p.Targets = append(p.Targets, Target{Name: name, Service: svcPort, Protocol: proto, Endpoints: eps, Affinity: affinity})
	}
	return name
}

// targetName is kind + a hash: nft chain names are limited to 256 bytes
// and service names may be long, so upstream hashes them too.
func targetName(kind, svcPort string, proto Protocol) string {
	sum := sha256.Sum256([]byte(svcPort + "/" + string(proto)))
	return kind + "-" + strings.ToLower(base32.StdEncoding.EncodeToString(sum[:10]))
}

// equal tells whether two targets make the same chains and sets.
func (t Target) equal(o Target) bool {
	return t.Name == o.Name && t.Protocol == o.Protocol && t.Affinity == o.Affinity && slices.Equal(t.Endpoints, o.Endpoints)
}
