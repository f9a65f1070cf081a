package nodeipam

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"
)

// allocator tracks which node holds which subnets across the cluster CIDRs
// (one per IP family, in the configured order). It remembers allocations it
// made before the node object shows them, so a stale informer cache never
// makes it hand a node a second CIDR.
type allocator struct {
	mu    sync.Mutex
	sets  []*cidrSet
	nodes map[string][]netip.Prefix // node name -> its subnets
	owner map[netip.Prefix]string   // subnet -> node name
}

// newAllocator parses a comma-separated list with at most one CIDR per
// IP family and builds a set for each with the family's node mask size.
func newAllocator(clusterCIDRs string, maskV4, maskV6 int) (*allocator, error) {
	a := &allocator{nodes: map[string][]netip.Prefix{}, owner: map[netip.Prefix]string{}}
	seen := map[bool]bool{}
	for _, s := range strings.Split(clusterCIDRs, ",") {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("nodeipam: parse cluster CIDR %q: %w", s, err)
		}
		v4 := p.Addr().Unmap().Is4()
		if seen[v4] {
			return nil, fmt.Errorf("nodeipam: cluster CIDRs %q: at most one CIDR per IP family", clusterCIDRs)
		}
		seen[v4] = true
		mask := maskV6
		if v4 {
			mask = maskV4
		}
		set, err := newCIDRSet(p, mask)
		if err != nil {
			return nil, err
		}
		a.sets = append(a.sets, set)
	}
	return a, nil
}

func (a *allocator) setFor(p netip.Prefix) *cidrSet {
	for _, s := range a.sets {
		if s.base.Addr().Is4() == p.Addr().Unmap().Is4() {
			return s
		}
	}
	return nil
}

// occupy records that node holds cidrs (from its spec). Earlier allocations
// for the node that it does not hold are released. CIDRs outside the
// cluster CIDRs are skipped and returned as an error for logging only; the
// rest are still recorded.
func (a *allocator) occupy(node string, cidrs []string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var held []netip.Prefix
	var bad []string
	for _, c := range cidrs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			bad = append(bad, c)
			continue
		}
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()).Masked()
		s := a.setFor(p)
		if s == nil || s.occupy(p) != nil {
			bad = append(bad, c)
			continue
		}
		held = append(held, p)
	}
	for _, old := range a.nodes[node] {
		if !containsPrefix(held, old) {
			a.releaseLocked(node, old)
		}
	}
	for _, p := range held {
		a.owner[p] = node
	}
	a.nodes[node] = held
	if len(bad) > 0 {
		return fmt.Errorf("%w: node %s has %v", ErrOutOfRange, node, bad)
	}
	return nil
}

// allocate returns node's subnets, one from each cluster CIDR, handing out
// new ones unless it already holds them. On failure nothing is kept.
func (a *allocator) allocate(node string) ([]netip.Prefix, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if have := a.nodes[node]; len(have) == len(a.sets) {
		return append([]netip.Prefix(nil), have...), nil
	}
	for _, old := range a.nodes[node] {
		a.releaseLocked(node, old)
	}
	delete(a.nodes, node)
	var got []netip.Prefix
	for _, s := range a.sets {
		p, err := s.allocateNext()
		if err != nil {
			for _, q := range got {
				_ = a.setFor(q).release(q)
			}
			return nil, err
		}
		got = append(got, p)
	}
	for _, p := range got {
		a.owner[p] = node
	}
	a.nodes[node] = got
	return append([]netip.Prefix(nil), got...), nil
}

// release frees everything node holds.
func (a *allocator) release(node string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range a.nodes[node] {
		a.releaseLocked(node, p)
	}
	delete(a.nodes, node)
}

// releaseLocked frees p unless another node claims it too (two nodes with
// one CIDR is a misconfiguration; freeing it would hand it out a third time).
func (a *allocator) releaseLocked(node string, p netip.Prefix) {
	if a.owner[p] != node {
		return
	}
	delete(a.owner, p)
	if s := a.setFor(p); s != nil {
		_ = s.release(p)
	}
}

func containsPrefix(list []netip.Prefix, p netip.Prefix) bool {
	for _, q := range list {
		if q == p {
			return true
		}
	}
	return false
}
