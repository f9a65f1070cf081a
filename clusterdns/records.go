package clusterdns

// The records of the cluster zone, as the Kubernetes DNS specification
// (kubernetes/dns docs/specification.md, schema 1.1.0) and CoreDNS's
// kubernetes plugin give them:
//
//	<svc>.<ns>.svc.<zone>                 A/AAAA: ClusterIPs; headless: ready endpoints;
//	                                      ExternalName: CNAME
//	<host>.<svc>.<ns>.svc.<zone>          A/AAAA of a headless endpoint (its hostname, or
//	                                      its address with dashes)
//	_<port>._<proto>.<svc>.<ns>.svc.<zone> SRV of a named port
//	<a-b-c-d>.<ns>.pod.<zone>             A/AAAA of that address (any, as the spec says)
//	<reverse>.in-addr.arpa / ip6.arpa     PTR of ClusterIPs and headless endpoints
//	dns-version.<zone>                    TXT "1.1.0"
//
// A name that exists without records of the asked type (the zone, a
// namespace, an IPv4-only Service asked for AAAA) is NODATA; anything else
// in the zone, a headless Service without ready endpoints included, is
// NXDOMAIN.

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// schemaVersion is the version of the DNS specification served.
const schemaVersion = "1.1.0"

// zone answers for one cluster domain from a Source.
type zone struct {
	origin string // "cluster.local.", lower case
	ttl    uint32
	src    Source
}

// result of a lookup in the zone: rrs are all the name's records (of any
// type); exists tells an empty name (NODATA) from a missing one (NXDOMAIN).
type result struct {
	rrs    []dns.RR
	extra  []dns.RR // addresses of SRV targets
	exists bool
}

// inZone tells whether name (lower case, fully qualified) is the zone or
// below it.
func (z *zone) inZone(name string) bool { return dns.IsSubDomain(z.origin, name) }

// lookup returns the records of name (lower case, fully qualified, in the
// zone). owner is the name as asked, used as the answers' owner name.
func (z *zone) lookup(owner, name string) result {
	if name == z.origin {
		return result{rrs: []dns.RR{z.soa(owner), z.ns(owner)}, exists: true}
	}
	labels := dns.SplitDomainName(strings.TrimSuffix(name, "."+z.origin))
	n := len(labels)
	switch {
	case n == 1 && labels[0] == "dns-version":
		return result{rrs: []dns.RR{&dns.TXT{Hdr: z.hdr(owner, dns.TypeTXT), Txt: []string{schemaVersion}}}, exists: true}
	case labels[n-1] == "svc":
		return z.service(owner, labels[:n-1])
	case labels[n-1] == "pod":
		return z.pod(owner, labels[:n-1])
	}
	return result{}
}

// service handles the names under svc.<zone>; labels are those before
// "svc", outermost last.
func (z *zone) service(owner string, labels []string) result {
	n := len(labels)
	switch n {
	case 0:
		return result{exists: true}
	case 1:
		return result{exists: z.src.NamespaceHasServices(labels[0])}
	}
	ns, name := labels[n-1], labels[n-2]
	svc := z.src.Service(ns, name)
	if svc == nil {
		return result{}
	}
	switch {
	case n == 2:
		return z.serviceAddresses(owner, svc)
	case n == 3 && strings.HasPrefix(labels[0], "_"):
		// "_tcp.<svc>": exists while a port of that protocol has a name.
		return result{exists: len(z.srv(svc, "", labels[0][1:])) > 0}
	case n == 3 && isHeadless(svc):
		var rrs []dns.RR
		for _, ep := range z.readyEndpoints(svc) {
			if ep.host == labels[0] {
				rrs = append(rrs, z.address(owner, ep.ip))
			}
		}
		return result{rrs: rrs, exists: len(rrs) > 0}
	case n == 4 && strings.HasPrefix(labels[0], "_") && strings.HasPrefix(labels[1], "_"):
		targets := z.srv(svc, labels[0][1:], labels[1][1:])
		var res result
		for _, t := range targets {
			res.rrs = append(res.rrs, &dns.SRV{Hdr: z.hdr(owner, dns.TypeSRV), Priority: 0,
				Weight: uint16(100 / len(targets)), Port: t.port, Target: t.name})
			if !slices.ContainsFunc(res.extra, func(rr dns.RR) bool { return sameAddress(rr, t.name, t.ip) }) {
				res.extra = append(res.extra, z.address(t.name, t.ip))
			}
		}
		res.exists = len(res.rrs) > 0
		return res
	}
	return result{}
}

// serviceAddresses are the records of <svc>.<ns>.svc.<zone>.
func (z *zone) serviceAddresses(owner string, svc *corev1.Service) result {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		if svc.Spec.ExternalName == "" {
			return result{exists: true}
		}
		return result{rrs: []dns.RR{&dns.CNAME{Hdr: z.hdr(owner, dns.TypeCNAME), Target: dns.Fqdn(svc.Spec.ExternalName)}}, exists: true}
	}
	var rrs []dns.RR
	if isHeadless(svc) {
		seen := map[netip.Addr]bool{}
		for _, ep := range z.readyEndpoints(svc) {
			if !seen[ep.ip] {
				seen[ep.ip] = true
				rrs = append(rrs, z.address(owner, ep.ip))
			}
		}
		// No ready endpoint: NXDOMAIN (specification 2.4.1).
		return result{rrs: rrs, exists: len(rrs) > 0}
	}
	for _, s := range clusterIPs(svc) {
		if ip, err := netip.ParseAddr(s); err == nil {
			rrs = append(rrs, z.address(owner, ip))
		}
	}
	return result{rrs: rrs, exists: true}
}

// srvTarget is one answer of an SRV query.
type srvTarget struct {
	name string // fully qualified
	port uint16
	ip   netip.Addr
}

// srv gives the targets of _<port>._<proto>.<svc>; an empty port matches
// every named port of proto.
func (z *zone) srv(svc *corev1.Service, port, proto string) []srvTarget {
	match := func(name string, p corev1.Protocol) bool {
		if name == "" || strings.ToLower(string(p)) != proto {
			return false
		}
		return port == "" || strings.ToLower(name) == port
	}
	svcName := svc.Name + "." + svc.Namespace + ".svc." + z.origin
	var out []srvTarget
	if !isHeadless(svc) {
		if svc.Spec.Type == corev1.ServiceTypeExternalName {
			return nil
		}
		for _, p := range svc.Spec.Ports {
			if !match(p.Name, protocolOr(p.Protocol)) {
				continue
			}
			for _, s := range clusterIPs(svc) {
				if ip, err := netip.ParseAddr(s); err == nil {
					out = append(out, srvTarget{name: svcName, port: uint16(p.Port), ip: ip})
					break // one target: the Service's name
				}
			}
		}
		return out
	}
	for _, ep := range z.readyEndpoints(svc) {
		for _, p := range ep.ports {
			if p.Name != nil && p.Port != nil && match(*p.Name, protocolOr(ptrOr(p.Protocol))) {
				out = append(out, srvTarget{name: ep.host + "." + svcName, port: uint16(*p.Port), ip: ep.ip})
			}
		}
	}
	return out
}

// endpoint is one ready address of a headless Service.
type endpoint struct {
	ip    netip.Addr
	host  string // the endpoint's hostname, else its address with dashes
	ports []discoveryv1.EndpointPort
}

// readyEndpoints of svc from its EndpointSlices (ready unset counts as
// ready, as the API documents).
func (z *zone) readyEndpoints(svc *corev1.Service) []endpoint {
	var out []endpoint
	for _, es := range z.src.EndpointSlices(svc.Namespace, svc.Name) {
		for _, ep := range es.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			for _, a := range ep.Addresses {
				ip, err := netip.ParseAddr(a)
				if err != nil {
					continue
				}
				host := dashed(ip)
				if ep.Hostname != nil && *ep.Hostname != "" {
					host = strings.ToLower(*ep.Hostname)
				}
				out = append(out, endpoint{ip: ip, host: host, ports: es.Ports})
			}
		}
	}
	return out
}

// pod handles <ip-with-dashes>.<ns>.pod.<zone>: the specification (2.6)
// requires an answer for any address in any namespace, as CoreDNS's
// "pods insecure" (kubeadm's default) gives it.
func (z *zone) pod(owner string, labels []string) result {
	switch len(labels) {
	case 0, 1:
		return result{exists: true}
	case 2:
		ip, ok := undash(labels[0])
		if !ok {
			return result{}
		}
		return result{rrs: []dns.RR{z.address(owner, ip)}, exists: true}
	}
	return result{}
}

// reverse returns the PTR records of ip: the names of the Services with
// that ClusterIP and of headless Services' endpoints at that address;
// nil when the cluster does not know the address.
func (z *zone) reverse(owner string, ip netip.Addr) []dns.RR {
	var rrs []dns.RR
	add := func(target string) {
		if !slices.ContainsFunc(rrs, func(rr dns.RR) bool { return rr.(*dns.PTR).Ptr == target }) {
			rrs = append(rrs, &dns.PTR{Hdr: z.hdr(owner, dns.TypePTR), Ptr: target})
		}
	}
	for _, svc := range z.src.ServicesByClusterIP(ip) {
		if !isHeadless(svc) {
			add(svc.Name + "." + svc.Namespace + ".svc." + z.origin)
		}
	}
	for _, es := range z.src.SlicesByAddress(ip) {
		svc := z.src.Service(es.Namespace, es.Labels[discoveryv1.LabelServiceName])
		if svc == nil || !isHeadless(svc) {
			continue
		}
		for _, ep := range z.readyEndpoints(svc) {
			if ep.ip == ip {
				add(ep.host + "." + svc.Name + "." + svc.Namespace + ".svc." + z.origin)
			}
		}
	}
	return rrs
}

func (z *zone) hdr(name string, t uint16) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: z.ttl}
}

func (z *zone) address(owner string, ip netip.Addr) dns.RR {
	if ip.Is4() {
		return &dns.A{Hdr: z.hdr(owner, dns.TypeA), A: ip.AsSlice()}
	}
	return &dns.AAAA{Hdr: z.hdr(owner, dns.TypeAAAA), AAAA: ip.AsSlice()}
}

// soa is the zone's SOA as CoreDNS gives it; its minimum (the negative
// caching TTL) is the zone's TTL.
func (z *zone) soa(owner string) dns.RR {
	return &dns.SOA{Hdr: z.hdr(owner, dns.TypeSOA), Ns: "ns.dns." + z.origin, Mbox: "hostmaster." + z.origin,
		Serial: 1, Refresh: 7200, Retry: 1800, Expire: 86400, Minttl: z.ttl}
}

func (z *zone) ns(owner string) dns.RR {
	return &dns.NS{Hdr: z.hdr(owner, dns.TypeNS), Ns: "ns.dns." + z.origin}
}

func isHeadless(svc *corev1.Service) bool {
	return svc.Spec.Type != corev1.ServiceTypeExternalName && svc.Spec.ClusterIP == corev1.ClusterIPNone
}

func sameAddress(rr dns.RR, name string, ip netip.Addr) bool {
	if rr.Header().Name != name {
		return false
	}
	switch a := rr.(type) {
	case *dns.A:
		return netip.AddrFrom4([4]byte(a.A.To4())) == ip
	case *dns.AAAA:
		addr, _ := netip.AddrFromSlice(a.AAAA)
		return addr == ip
	}
	return false
}

func protocolOr(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}

func ptrOr[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// dashed writes ip with dashes for dots (or colons): 10-244-0-5.
func dashed(ip netip.Addr) string {
	if ip.Is4() {
		return strings.ReplaceAll(ip.String(), ".", "-")
	}
	return strings.ReplaceAll(ip.StringExpanded(), ":", "-")
}

// undash reads a pod or endpoint label: 10-244-0-5, or an IPv6 address
// with dashes for colons.
func undash(label string) (netip.Addr, bool) {
	if ip, err := netip.ParseAddr(strings.ReplaceAll(label, "-", ".")); err == nil && ip.Is4() {
		return ip, true
	}
	if ip, err := netip.ParseAddr(strings.ReplaceAll(label, "-", ":")); err == nil && ip.Is6() {
		return ip, true
	}
	return netip.Addr{}, false
}

// reverseIP reads an in-addr.arpa or ip6.arpa name (lower case, fully
// qualified) holding a whole address.
func reverseIP(name string) (netip.Addr, bool) {
	if rest, ok := strings.CutSuffix(name, ".in-addr.arpa."); ok {
		parts := strings.Split(rest, ".")
		if len(parts) != 4 {
			return netip.Addr{}, false
		}
		var b [4]byte
		for i, p := range parts {
			v, err := strconv.ParseUint(p, 10, 8)
			if err != nil {
				return netip.Addr{}, false
			}
			b[3-i] = byte(v)
		}
		return netip.AddrFrom4(b), true
	}
	if rest, ok := strings.CutSuffix(name, ".ip6.arpa."); ok {
		parts := strings.Split(rest, ".")
		if len(parts) != 32 {
			return netip.Addr{}, false
		}
		var b [16]byte
		for i, p := range parts {
			v, err := strconv.ParseUint(p, 16, 4)
			if err != nil || len(p) != 1 {
				return netip.Addr{}, false
			}
			j := 31 - i
			b[j/2] |= byte(v) << (4 * (1 - j%2))
		}
		return netip.AddrFrom16(b), true
	}
	return netip.Addr{}, false
}
