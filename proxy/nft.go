package proxy

// The executor writes a Plan as the nodelet's services table. The first
// write (and one an hour) replaces the whole table in one transaction
// (delete + add in one batch: packets see the old table or the new one,
// never a mix); later ones change only what differs, also in one
// transaction:
//
//	table ip nodelet-services {                 # ip6 for IPv6
//		map service-ips { type ipv4_addr . inet_proto . inet_service : verdict     # DNAT rules
//			elements = { 10.96.0.10 . tcp . 80 : goto svc-<hash>, 10.0.0.1 . tcp . 30080 : goto ext-<hash> } }
//		map no-endpoint-services { ... : verdict                                     # Reject and Drop rules
//			elements = { 10.96.0.12 . tcp . 80 : goto reject, 10.0.0.1 . tcp . 30081 : drop } }
//		set masq-unless-from-pods { ... }      # ClusterIPs: masquerade unless from this node's pods
//		set masq { ... }                       # external traffic with the Cluster policy
//		chain nat-prerouting { type nat hook prerouting priority dstnat; jump services }
//		chain nat-output     { type nat hook output priority dstnat; jump services }
//		chain services {
//			ip saddr != <pod CIDR> ip daddr . meta l4proto . th dport @masq-unless-from-pods meta mark set mark | 0x4000
//			ip daddr . meta l4proto . th dport @masq meta mark set mark | 0x4000
//			ip daddr . meta l4proto . th dport vmap @service-ips
//		}
//		chain nat-postrouting {
//			type nat hook postrouting priority srcnat;
//			meta mark & 0x4000 == 0 return
//			meta mark set mark ^ 0x4000 masquerade fully-random
//		}
//		chain filter-input   { type filter hook input priority -110; jump no-endpoints }
//		chain filter-forward { type filter hook forward priority -110; jump no-endpoints }
//		chain filter-output  { type filter hook output priority -110; jump no-endpoints }
//		chain no-endpoints { ip daddr . meta l4proto . th dport vmap @no-endpoint-services }
//		chain reject { meta l4proto tcp reject with tcp reset; reject }
//		set aff-svc-<hash>-0 { type ipv4_addr; flags dynamic,timeout; timeout 10800s }  # ClientIP affinity
//		chain svc-<hash> {
//			ip saddr @aff-svc-<hash>-0 goto svc-<hash>-0      # affinity only
//			numgen random mod 2 vmap { 0 : goto svc-<hash>-0, 1 : goto svc-<hash>-1 }
//		}
//		chain svc-<hash>-0 {
//			ip saddr 10.244.0.5 meta mark set mark | 0x4000   # hairpin
//			update @aff-svc-<hash>-0 { ip saddr }             # affinity only
//			meta l4proto tcp dnat to 10.244.0.5:8080
//		}
//	}
//
// The filter checks run at priority -110, before the nat output hook
// (-100), so a node's own connection to a service without endpoints is
// refused at once; a pod's reaches the forward hook undisturbed by NAT.

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// TableName is the name of the proxy's table in both families.
const TableName = "nodelet-services"

// masqMark marks connections to masquerade in postrouting (upstream's
// kube-proxy bit).
const masqMark uint32 = 0x4000

// filterPriority runs the no-endpoint checks before DNAT (-100).
var filterPriority = nftables.ChainPriorityRef(-110)

func family(is6 bool) nftables.TableFamily {
	if is6 {
		return nftables.TableFamilyIPv6
	}
	return nftables.TableFamilyIPv4
}

// protoNum is the IP protocol number of p.
func protoNum(p Protocol) byte {
	switch p {
	case UDP:
		return unix.IPPROTO_UDP
	case SCTP:
		return unix.IPPROTO_SCTP
	}
	return unix.IPPROTO_TCP
}

// writeTable replaces the table with p: the old table (if any) goes and
// the new one comes in one transaction.
func writeTable(nft *nftables.Conn, p Plan) error {
	t := &nftables.Table{Name: TableName, Family: family(p.Is6)}
	nft.AddTable(t) // so that the delete finds one on a fresh host
	nft.DelTable(t)
	nft.AddTable(t)
	w := &tableWriter{nft: nft, t: t, is6: p.Is6, podCIDR: p.PodCIDR}
	if err := w.base(); err != nil {
		return err
	}
	for _, tg := range p.Targets {
		if err := w.target(tg); err != nil {
			return err
		}
	}
	if err := w.dispatch(p); err != nil {
		return err
	}
	return nft.Flush()
}

// updateTable turns the table written for old into the one for p in one
// transaction, touching only what differs: the dispatch chains when a
// rule changed, and the chains (and affinity sets) of the targets that
// changed, came or went. An endpoint change rewrites one service's
// chains, not the table.
func updateTable(nft *nftables.Conn, old, p Plan) error {
	t := &nftables.Table{Name: TableName, Family: family(p.Is6)}
	w := &tableWriter{nft: nft, t: t, is6: p.Is6, podCIDR: p.PodCIDR}
	named := func(name string) *nftables.Chain { return &nftables.Chain{Name: name, Table: t} }
	rulesChanged := old.PodCIDR != p.PodCIDR || !slices.Equal(old.Rules, p.Rules)
	if rulesChanged {
		for _, m := range dispatchSets {
			nft.FlushSet(&nftables.Set{Table: t, Name: m})
		}
	}
	next := map[string]Target{}
	for _, tg := range p.Targets {
		next[tg.Name] = tg
	}
	for _, o := range old.Targets {
		n, kept := next[o.Name]
		if kept && n.equal(o) {
			continue
		}
		nft.FlushChain(named(o.Name))
		for i := range o.Endpoints {
			nft.FlushChain(named(endpointChain(o.Name, i)))
		}
		keep := 0 // endpoint chains and sets that stay
		if kept {
			keep = len(n.Endpoints)
		}
		for i := keep; i < len(o.Endpoints); i++ {
			nft.DelChain(named(endpointChain(o.Name, i)))
		}
		if o.Affinity > 0 {
			keepSets := keep
			if n.Affinity != o.Affinity {
				keepSets = 0 // a set's timeout is fixed: make new ones
			}
			for i := keepSets; i < len(o.Endpoints); i++ {
				nft.DelSet(&nftables.Set{Table: t, Name: affinitySet(o.Name, i)})
			}
		}
		if !kept {
			nft.DelChain(named(o.Name))
		}
	}
	for _, tg := range p.Targets {
		if o, ok := findTarget(old, tg.Name); ok && o.equal(tg) {
			continue
		}
		if err := w.target(tg); err != nil {
			return err
		}
	}
	if rulesChanged {
		if err := w.dispatch(p); err != nil {
			return err
		}
	}
	return nft.Flush()
}

func findTarget(p Plan, name string) (Target, bool) {
	i, ok := slices.BinarySearchFunc(p.Targets, name, func(t Target, n string) int { return strings.Compare(t.Name, n) })
	if !ok {
		return Target{}, false
	}
	return p.Targets[i], true
}

// withoutSCTP is p without its SCTP rules and targets.
func withoutSCTP(p Plan) Plan {
	q := p
	q.Rules = slices.DeleteFunc(slices.Clone(p.Rules), func(r Rule) bool { return r.Protocol == SCTP })
	q.Targets = slices.DeleteFunc(slices.Clone(p.Targets), func(t Target) bool { return t.Protocol == SCTP })
	return q
}

// deleteTables removes the table of both families in one transaction; a
// missing one is no error.
func deleteTables(nft *nftables.Conn) error {
	for _, is6 := range []bool{false, true} {
		t := &nftables.Table{Name: TableName, Family: family(is6)}
		nft.AddTable(t)
		nft.DelTable(t)
	}
	if err := nft.Flush(); err != nil {
		return fmt.Errorf("delete nft tables ip/ip6 %s: %w", TableName, err)
	}
	return nil
}

type tableWriter struct {
	nft     *nftables.Conn
	t       *nftables.Table
	is6     bool
	podCIDR netip.Prefix // valid: the masq-unless-from-pods rule exists
}

func (w *tableWriter) chain(name string, hook *nftables.ChainHook, typ nftables.ChainType, prio *nftables.ChainPriority) *nftables.Chain {
	c := &nftables.Chain{Name: name, Table: w.t}
	if hook != nil {
		accept := nftables.ChainPolicyAccept
		c.Hooknum, c.Type, c.Priority, c.Policy = hook, typ, prio, &accept
	}
	return w.nft.AddChain(c)
}

func (w *tableWriter) rule(c *nftables.Chain, exprs ...expr.Any) {
	w.nft.AddRule(&nftables.Rule{Table: w.t, Chain: c, Exprs: exprs})
}

// The chains and maps every table has. The dispatch is by map lookups on
// (destination, protocol, port), so a connection's first packet costs the
// same with 10 services or 10,000:
//
//	chain services {
//		ip saddr != <pod CIDR> ip daddr . meta l4proto . th dport @masq-unless-from-pods meta mark set mark | 0x4000
//		ip daddr . meta l4proto . th dport @masq meta mark set mark | 0x4000
//		ip daddr . meta l4proto . th dport vmap @service-ips        # goto svc-<hash>
//	}
//	chain no-endpoints {
//		ip daddr . meta l4proto . th dport vmap @no-endpoint-services   # goto reject, or drop
//	}
//	chain reject { meta l4proto tcp reject with tcp reset; reject }
const (
	chainServices    = "services"
	chainNoEndpoints = "no-endpoints"
	chainReject      = "reject"

	mapServiceIPs     = "service-ips"
	mapNoEndpoints    = "no-endpoint-services"
	setMasq           = "masq"
	setMasqUnlessPods = "masq-unless-from-pods"
)

// dispatchSets are the sets and maps a partial sync flushes and refills.
var dispatchSets = []string{mapServiceIPs, mapNoEndpoints, setMasq, setMasqUnlessPods}

// keyType is the type of the dispatch keys: address . protocol . port.
func (w *tableWriter) keyType() nftables.SetDatatype {
	addr := nftables.TypeIPAddr
	if w.is6 {
		addr = nftables.TypeIP6Addr
	}
	t, _ := nftables.ConcatSetType(addr, nftables.TypeInetProto, nftables.TypeInetService)
	return t
}

// key is a dispatch key as the kernel compares it: each field padded to
// 4 bytes (the register size).
func key(dst netip.Addr, proto Protocol, port uint16) []byte {
	k := append(dst.AsSlice(), protoNum(proto), 0, 0, 0)
	return append(k, byte(port>>8), byte(port), 0, 0)
}

// loadKey loads the packet's destination . l4proto . destination port
// into consecutive registers from NFT_REG_1.
func (w *tableWriter) loadKey() []expr.Any {
	_, daddr, n := w.addrOffsets()
	protoReg, portReg := uint32(9), uint32(10) // NFT_REG32_01, _02 after a 4-byte address
	if w.is6 {
		protoReg, portReg = 12, 13 // after a 16-byte address (NFT_REG32_00.._03)
	}
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: daddr, Len: n},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: protoReg},
		&expr.Payload{DestRegister: portReg, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
	}
}

func (w *tableWriter) set(name string, isMap bool) *nftables.Set {
	s := &nftables.Set{Table: w.t, Name: name, KeyType: w.keyType()}
	if isMap {
		s.IsMap, s.DataType = true, nftables.TypeVerdict
	}
	return s
}

// base adds the hooked chains, the dispatch chains and their (empty) maps.
func (w *tableWriter) base() error {
	sets := map[string]*nftables.Set{}
	for _, name := range dispatchSets {
		s := w.set(name, name == mapServiceIPs || name == mapNoEndpoints)
		if err := w.nft.AddSet(s, nil); err != nil {
			return fmt.Errorf("set %s: %w", name, err)
		}
		sets[name] = s
	}
	reject := w.chain(chainReject, nil, "", nil)
	w.rule(reject, &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}}, w.reject(TCP))
	w.rule(reject, w.reject(UDP))
	services := w.chain(chainServices, nil, "", nil)
	lookup := func(s *nftables.Set) []expr.Any {
		return append(w.loadKey(), &expr.Lookup{SourceRegister: 1, SetName: s.Name, SetID: s.ID})
	}
	vmap := func(s *nftables.Set) []expr.Any {
		return append(w.loadKey(), &expr.Lookup{SourceRegister: 1, SetName: s.Name, SetID: s.ID, IsDestRegSet: true, DestRegister: 0})
	}
	if w.podCIDR.IsValid() {
		w.rule(services, slices.Concat(w.addrMatch(false, w.podCIDR, expr.CmpOpNeq), lookup(sets[setMasqUnlessPods]), setMasqMark())...)
	}
	w.rule(services, append(lookup(sets[setMasq]), setMasqMark()...)...)
	w.rule(services, vmap(sets[mapServiceIPs])...)
	noEP := w.chain(chainNoEndpoints, nil, "", nil)
	w.rule(noEP, vmap(sets[mapNoEndpoints])...)
	for _, h := range []struct {
		name string
		hook *nftables.ChainHook
	}{{"nat-prerouting", nftables.ChainHookPrerouting}, {"nat-output", nftables.ChainHookOutput}} {
		w.rule(w.chain(h.name, h.hook, nftables.ChainTypeNAT, nftables.ChainPriorityNATDest),
			&expr.Verdict{Kind: expr.VerdictJump, Chain: services.Name})
	}
	post := w.chain("nat-postrouting", nftables.ChainHookPostrouting, nftables.ChainTypeNAT, nftables.ChainPriorityNATSource)
	w.rule(post, loadMark(), &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
		Mask: binary.NativeEndian.AppendUint32(nil, masqMark), Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: make([]byte, 4)},
		&expr.Verdict{Kind: expr.VerdictReturn})
	w.rule(post, loadMark(), &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
		Mask: binary.NativeEndian.AppendUint32(nil, ^uint32(0)), Xor: binary.NativeEndian.AppendUint32(nil, masqMark)},
		storeMark(), &expr.Masq{FullyRandom: true})
	for _, h := range []struct {
		name string
		hook *nftables.ChainHook
	}{{"filter-input", nftables.ChainHookInput}, {"filter-forward", nftables.ChainHookForward}, {"filter-output", nftables.ChainHookOutput}} {
		w.rule(w.chain(h.name, h.hook, nftables.ChainTypeFilter, filterPriority),
			&expr.Verdict{Kind: expr.VerdictJump, Chain: noEP.Name})
	}
	return nil
}

// dispatch fills the (empty) dispatch maps with p's rules; the targets'
// chains exist already or come earlier in the same batch.
func (w *tableWriter) dispatch(p Plan) error {
	els := map[string][]nftables.SetElement{}
	for _, r := range p.Rules {
		k := key(r.Dst, r.Protocol, r.Port)
		switch r.Action {
		case Reject:
			els[mapNoEndpoints] = append(els[mapNoEndpoints], nftables.SetElement{Key: k,
				VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: chainReject}})
		case Drop:
			els[mapNoEndpoints] = append(els[mapNoEndpoints], nftables.SetElement{Key: k,
				VerdictData: &expr.Verdict{Kind: expr.VerdictDrop}})
		case DNAT:
			if r.Masquerade {
				set := setMasq
				if r.MasqueradeUnlessFromPods && p.PodCIDR.IsValid() {
					set = setMasqUnlessPods
				}
				els[set] = append(els[set], nftables.SetElement{Key: k})
			}
			els[mapServiceIPs] = append(els[mapServiceIPs], nftables.SetElement{Key: k,
				VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: r.Target}})
		}
	}
	for _, name := range dispatchSets {
		if len(els[name]) == 0 {
			continue
		}
		s := w.set(name, name == mapServiceIPs || name == mapNoEndpoints)
		// One message's attributes are limited to 64 KiB: add in chunks.
		for chunk := range slices.Chunk(els[name], 256) {
			if err := w.nft.SetAddElements(s, chunk); err != nil {
				return fmt.Errorf("elements of %s: %w", name, err)
			}
		}
	}
	return nil
}

// addrOffsets are the offsets of the source and destination addresses in
// the network header, and their length.
func (w *tableWriter) addrOffsets() (saddr, daddr, n uint32) {
	if w.is6 {
		return 8, 24, 16
	}
	return 12, 16, 4
}

// addrMatch compares the source (dst false) or destination address with
// the prefix.
func (w *tableWriter) addrMatch(dst bool, pfx netip.Prefix, op expr.CmpOp) []expr.Any {
	saddr, daddr, n := w.addrOffsets()
	off := saddr
	if dst {
		off = daddr
	}
	out := []expr.Any{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n}}
	if pfx.Bits() < pfx.Addr().BitLen() {
		out = append(out, &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: n,
			Mask: net.CIDRMask(pfx.Bits(), pfx.Addr().BitLen()), Xor: make([]byte, n)})
	}
	return append(out, &expr.Cmp{Op: op, Register: 1, Data: pfx.Masked().Addr().AsSlice()})
}

// reject answers TCP with a reset, the rest with ICMP port unreachable.
func (w *tableWriter) reject(p Protocol) expr.Any {
	if p == TCP {
		return &expr.Reject{Type: unix.NFT_REJECT_TCP_RST}
	}
	code := uint8(3) // ICMP_PORT_UNREACH
	if w.is6 {
		code = 4 // ICMPV6_PORT_UNREACH
	}
	return &expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: code}
}

func loadMark() expr.Any { return &expr.Meta{Key: expr.MetaKeyMARK, Register: 1} }
func storeMark() expr.Any {
	return &expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1}
}

// setMasqMark is `meta mark set mark | 0x4000`.
func setMasqMark() []expr.Any {
	return []expr.Any{loadMark(), &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
		Mask: binary.NativeEndian.AppendUint32(nil, ^masqMark), Xor: binary.NativeEndian.AppendUint32(nil, masqMark)},
		storeMark()}
}

// endpointChain names the chain of a target's i-th endpoint.
func endpointChain(target string, i int) string { return fmt.Sprintf("%s-%d", target, i) }

// affinitySet names the affinity set of a target's i-th endpoint.
func affinitySet(target string, i int) string { return fmt.Sprintf("aff-%s-%d", target, i) }

// target writes the target's chain (affinity lookups, then the random
// choice) and one chain per endpoint (hairpin mark, affinity update,
// DNAT).
func (w *tableWriter) target(tg Target) error {
	proto := tg.Protocol
	saddr, _, n := w.addrOffsets()
	keyType := nftables.TypeIPAddr
	if w.is6 {
		keyType = nftables.TypeIP6Addr
	}
	svc := w.chain(tg.Name, nil, "", nil)
	var sets []*nftables.Set
	if tg.Affinity > 0 {
		for i := range tg.Endpoints {
			s := &nftables.Set{Table: w.t, Name: affinitySet(tg.Name, i), KeyType: keyType,
				Dynamic: true, HasTimeout: true, Timeout: tg.Affinity}
			if err := w.nft.AddSet(s, nil); err != nil {
				return fmt.Errorf("set %s: %w", s.Name, err)
			}
			sets = append(sets, s)
		}
	}
	eps := make([]*nftables.Chain, len(tg.Endpoints))
	for i := range tg.Endpoints {
		eps[i] = w.chain(endpointChain(tg.Name, i), nil, "", nil)
	}
	loadSaddr := &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: saddr, Len: n}
	for i, s := range sets {
		w.rule(svc, loadSaddr, &expr.Lookup{SourceRegister: 1, SetName: s.Name, SetID: s.ID},
			&expr.Verdict{Kind: expr.VerdictGoto, Chain: eps[i].Name})
	}
	if len(eps) == 1 {
		w.rule(svc, &expr.Verdict{Kind: expr.VerdictGoto, Chain: eps[0].Name})
	} else {
		vmap := &nftables.Set{Table: w.t, Anonymous: true, Constant: true, IsMap: true,
			KeyType: nftables.TypeInteger, DataType: nftables.TypeVerdict}
		els := make([]nftables.SetElement, len(eps))
		for i, c := range eps {
			els[i] = nftables.SetElement{Key: binary.NativeEndian.AppendUint32(nil, uint32(i)),
				VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: c.Name}}
		}
		if err := w.nft.AddSet(vmap, els); err != nil {
			return fmt.Errorf("numgen map of %s: %w", tg.Name, err)
		}
		w.rule(svc, &expr.Numgen{Register: 1, Modulus: uint32(len(eps)), Type: unix.NFT_NG_RANDOM},
			&expr.Lookup{SourceRegister: 1, SetName: vmap.Name, SetID: vmap.ID, IsDestRegSet: true, DestRegister: 0})
	}
	natFamily := uint32(unix.NFPROTO_IPV4)
	if w.is6 {
		natFamily = unix.NFPROTO_IPV6
	}
	for i, ep := range tg.Endpoints {
		c := eps[i]
		w.rule(c, append(w.addrMatch(false, netip.PrefixFrom(ep.Addr(), ep.Addr().BitLen()), expr.CmpOpEq), setMasqMark()...)...)
		if i < len(sets) {
			w.rule(c, loadSaddr, &expr.Dynset{SrcRegKey: 1, SetName: sets[i].Name, SetID: sets[i].ID,
				Operation: unix.NFT_DYNSET_OP_UPDATE, Timeout: tg.Affinity})
		}
		w.rule(c,
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{protoNum(proto)}},
			&expr.Immediate{Register: 1, Data: ep.Addr().AsSlice()},
			&expr.Immediate{Register: 2, Data: binary.BigEndian.AppendUint16(nil, ep.Port())},
			&expr.NAT{Type: expr.NATTypeDestNAT, Family: natFamily, RegAddrMin: 1, RegProtoMin: 2, Specified: true})
	}
	return nil
}
