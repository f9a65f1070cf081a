package network

// The masquerade of this node's pods is one node-level nftables rule
// rather than the bridge plugin's rules per pod: traffic from a pod to
// another pod or to a node keeps the pod's source address (the routes of
// routes.go carry it), traffic leaving the cluster leaves with the node's.
// The whole table is written by Routes.Sync in one transaction:
//
//	table ip nodelet {                      # ip6 for an IPv6 pod CIDR
//		set nomasq {
//			type ipv4_addr
//			flags interval
//			elements = { <pod CIDRs and IPs of this node and its peers> }
//		}
//		chain postrouting {
//			type nat hook postrouting priority srcnat; policy accept;
//			ip saddr <PodCIDR> ip daddr @nomasq return
//			ip saddr <PodCIDR> masquerade
//		}
//	}

import (
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// The names in the nodelet's nft table; Cleanup deletes the table of both
// families by masqTable.
const (
	masqTable = "nodelet"
	masqSet   = "nomasq"
	masqChain = "postrouting"
)

// masqState is the content of the nodelet's nft table: the masquerade
// source and the destinations exempt from it. Equal states mean equal
// tables, which is what lets Sync skip an unchanged one.
type masqState struct {
	podCIDR netip.Prefix
	noMasq  []addrRange // sorted, disjoint, not adjacent
}

func (s masqState) equal(o masqState) bool {
	return s.podCIDR == o.podCIDR && slices.Equal(s.noMasq, o.noMasq)
}

// addrRange is the addresses from first to last, both included.
type addrRange struct{ first, last netip.Addr }

// desiredMasq is the table for podCIDR, nodeIP and peers. Only addresses
// of podCIDR's family go in the set; peers without an IP or CIDRs still
// contribute what they have, since the set only spares traffic from NAT.
func desiredMasq(podCIDR netip.Prefix, nodeIP netip.Addr, peers []Peer) masqState {
	is4 := podCIDR.Addr().Is4()
	prefixes := []netip.Prefix{podCIDR}
	add := func(p netip.Prefix) {
		if p.IsValid() && p.Addr().Is4() == is4 {
			prefixes = append(prefixes, p.Masked())
		}
	}
	addAddr := func(a netip.Addr) {
		if a = a.Unmap(); a.IsValid() {
			add(netip.PrefixFrom(a, a.BitLen()))
		}
	}
	addAddr(nodeIP)
	for _, p := range peers {
		addAddr(p.IP)
		for _, c := range p.PodCIDRs {
			add(c)
		}
	}
	return masqState{podCIDR: podCIDR, noMasq: mergeRanges(prefixes)}
}

// mergeRanges turns prefixes into sorted ranges, joining the overlapping
// and the adjacent: the kernel refuses overlapping intervals in a set.
func mergeRanges(prefixes []netip.Prefix) []addrRange {
	rs := make([]addrRange, 0, len(prefixes))
	for _, p := range prefixes {
		rs = append(rs, addrRange{first: p.Addr(), last: lastAddr(p)})
	}
	slices.SortFunc(rs, func(a, b addrRange) int { return a.first.Compare(b.first) })
	var out []addrRange
	for _, r := range rs {
		if n := len(out); n > 0 {
			cur := &out[n-1]
			next := cur.last.Next() // invalid once cur reaches the top
			if !next.IsValid() || r.first.Compare(next) <= 0 {
				if r.last.Compare(cur.last) > 0 {
					cur.last = r.last
				}
				continue
			}
		}
		out = append(out, r)
	}
	return out
}

// lastAddr is the highest address of the masked prefix p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// setElements encodes ranges as an interval set's elements, the way nft
// does: a start element per range and an interval-end element at the
// address after it (none for a range up to the top address), preceded by
// the interval-end element at the zero address that nft writes first, so
// the set holds exactly what `nft add element` would have put there.
func setElements(ranges []addrRange, is4 bool) []nftables.SetElement {
	zero := netip.IPv6Unspecified()
	if is4 {
		zero = netip.IPv4Unspecified()
	}
	var els []nftables.SetElement
	if len(ranges) == 0 || ranges[0].first != zero {
		els = append(els, nftables.SetElement{Key: zero.AsSlice(), IntervalEnd: true})
	}
	for _, r := range ranges {
		els = append(els, nftables.SetElement{Key: r.first.AsSlice()})
		if end := r.last.Next(); end.IsValid() {
			els = append(els, nftables.SetElement{Key: end.AsSlice(), IntervalEnd: true})
		}
	}
	return els
}

// masqFamily is the nft table family for addresses like a.
func masqFamily(a netip.Addr) (nftables.TableFamily, string) {
	if a.Is6() {
		return nftables.TableFamilyIPv6, "ip6"
	}
	return nftables.TableFamilyIPv4, "ip"
}

// syncMasq writes the table when it differs from the last one written
// (always on the first call: the table on the host may be a previous
// process's, stale or edited).
func (r *Routes) syncMasq(nft *nftables.Conn, peers []Peer) error {
	want := desiredMasq(r.cfg.PodCIDR, r.cfg.NodeIP, peers)
	if r.applied != nil && r.applied.equal(want) {
		return nil
	}
	r.nftTransactions++
	_, famName := masqFamily(want.podCIDR.Addr())
	if err := writeMasq(nft, want); err != nil {
		r.applied = nil // unknown: write it again next time
		return fmt.Errorf("write nft table %s %s: %w", famName, masqTable, err)
	}
	r.applied = &want
	r.log.Info("masquerade table written", "table", famName+" "+masqTable,
		"podCIDR", want.podCIDR, "noMasqRanges", len(want.noMasq))
	return nil
}

// writeMasq replaces the table with st in one transaction: the old table
// (if any) and the new one are swapped atomically, so pods' traffic never
// meets a moment without the rule, or with half of it.
func writeMasq(nft *nftables.Conn, st masqState) error {
	fam, _ := masqFamily(st.podCIDR.Addr())
	is4 := st.podCIDR.Addr().Is4()
	table := &nftables.Table{Name: masqTable, Family: fam}
	nft.AddTable(table) // so that the delete finds one on a fresh host
	nft.DelTable(table)
	nft.AddTable(table)
	keyType := nftables.TypeIP6Addr
	if is4 {
		keyType = nftables.TypeIPAddr
	}
	// A fixed ID: it only names the set to the lookup within this batch.
	set := &nftables.Set{Table: table, ID: 1, Name: masqSet, Interval: true, KeyType: keyType}
	if err := nft.AddSet(set, setElements(st.noMasq, is4)); err != nil {
		return fmt.Errorf("set %s: %w", masqSet, err)
	}
	accept := nftables.ChainPolicyAccept
	chain := nft.AddChain(&nftables.Chain{
		Name: masqChain, Table: table, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource, Policy: &accept,
	})
	for _, exprs := range masqRules(st.podCIDR, set) {
		nft.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: exprs})
	}
	return nft.Flush()
}

// masqRules are the chain's two rules, in order:
//
//	ip saddr <podCIDR> ip daddr @nomasq return
//	ip saddr <podCIDR> masquerade
func masqRules(podCIDR netip.Prefix, set *nftables.Set) [][]expr.Any {
	// Offsets of the addresses in the IPv4 and IPv6 headers.
	saddr, daddr, n := uint32(12), uint32(16), uint32(4)
	if podCIDR.Addr().Is6() {
		saddr, daddr, n = 8, 24, 16
	}
	fromPods := []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: saddr, Len: n},
	}
	if podCIDR.Bits() < podCIDR.Addr().BitLen() {
		fromPods = append(fromPods, &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: n,
			Mask: net.CIDRMask(podCIDR.Bits(), podCIDR.Addr().BitLen()), Xor: make([]byte, n)})
	}
	fromPods = append(fromPods, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: podCIDR.Addr().AsSlice()})
	exempt := append(slices.Clone(fromPods),
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: daddr, Len: n},
		&expr.Lookup{SourceRegister: 1, SetName: set.Name, SetID: set.ID},
		&expr.Verdict{Kind: expr.VerdictReturn},
	)
	masq := append(slices.Clone(fromPods), &expr.Masq{})
	return [][]expr.Any{exempt, masq}
}

// deleteMasqTables removes the nodelet's table of both families in one
// transaction; a missing table is no error (each is added first).
func deleteMasqTables(nft *nftables.Conn) error {
	for _, fam := range []nftables.TableFamily{nftables.TableFamilyIPv4, nftables.TableFamilyIPv6} {
		t := &nftables.Table{Name: masqTable, Family: fam}
		nft.AddTable(t)
		nft.DelTable(t)
	}
	if err := nft.Flush(); err != nil {
		return fmt.Errorf("delete nft tables ip/ip6 %s: %w", masqTable, err)
	}
	return nil
}
