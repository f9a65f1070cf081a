package nodeipam

import (
	"errors"
	"fmt"
	"math/bits"
	"net/netip"
)

// ErrCIDRRangeFull is returned when every node subnet of a cluster CIDR is
// handed out.
var ErrCIDRRangeFull = errors.New("nodeipam: CIDR range is full")

// ErrOutOfRange is returned for a CIDR that does not lie in the cluster CIDR.
var ErrOutOfRange = errors.New("nodeipam: CIDR out of the cluster CIDR")

// maxSubnetBits caps the number of node subnets at 2^16, as upstream's
// cidrset does (clusterSubnetMaxDiff), so the bitmap stays small.
const maxSubnetBits = 16

// cidrSet hands out the node-sized subnets of one cluster CIDR. Like
// upstream's cidrset it allocates round-robin from a moving candidate, so a
// released subnet is handed out again only after the others, which keeps a
// just-deleted node's routes from being reused at once. Not safe for
// concurrent use; the allocator serialises access.
type cidrSet struct {
	base     netip.Prefix // masked cluster CIDR
	nodeBits int          // prefix length of a node subnet
	shift    uint         // address bits below a node subnet
	count    int          // number of node subnets
	used     []uint64     // bitmap, one bit a subnet
	inUse    int
	next     int // round-robin candidate
}

// newCIDRSet validates the cluster CIDR and node mask size the way upstream
// does: the node mask may not be shorter than the cluster mask, longer than
// the address, or more than 16 bits longer than the cluster mask.
func newCIDRSet(cluster netip.Prefix, nodeBits int) (*cidrSet, error) {
	if !cluster.IsValid() {
		return nil, fmt.Errorf("nodeipam: invalid cluster CIDR %v", cluster)
	}
	cluster = netip.PrefixFrom(cluster.Addr().Unmap(), cluster.Bits()).Masked()
	total := cluster.Addr().BitLen()
	switch {
	case nodeBits > total:
		return nil, fmt.Errorf("nodeipam: node mask size %d is longer than the %d-bit address", nodeBits, total)
	case nodeBits < cluster.Bits():
		return nil, fmt.Errorf("nodeipam: node mask size %d is shorter than the cluster CIDR %v", nodeBits, cluster)
	case nodeBits-cluster.Bits() > maxSubnetBits:
		return nil, fmt.Errorf("nodeipam: node mask size %d is more than %d bits longer than the cluster CIDR %v", nodeBits, maxSubnetBits, cluster)
	}
	count := 1 << (nodeBits - cluster.Bits())
	return &cidrSet{
		base: cluster, nodeBits: nodeBits, shift: uint(total - nodeBits),
		count: count, used: make([]uint64, (count+63)/64),
	}, nil
}

func (s *cidrSet) isUsed(i int) bool { return s.used[i/64]&(1<<(i%64)) != 0 }

func (s *cidrSet) set(i int, on bool) {
	was := s.isUsed(i)
	switch {
	case on && !was:
		s.used[i/64] |= 1 << (i % 64)
		s.inUse++
	case !on && was:
		s.used[i/64] &^= 1 << (i % 64)
		s.inUse--
	}
}

// subnet returns node subnet number i.
func (s *cidrSet) subnet(i int) netip.Prefix {
	hi, lo := addrToU128(s.base.Addr())
	ohi, olo := shl128(uint64(i), s.shift)
	var carry uint64
	lo, carry = bits.Add64(lo, olo, 0)
	hi, _ = bits.Add64(hi, ohi, carry)
	return netip.PrefixFrom(u128ToAddr(hi, lo, s.base.Addr().Is4()), s.nodeBits)
}

// index returns the number of the node subnet that holds addr.
func (s *cidrSet) index(addr netip.Addr) int {
	hi, lo := addrToU128(addr)
	bhi, blo := addrToU128(s.base.Addr())
	var borrow uint64
	lo, borrow = bits.Sub64(lo, blo, 0)
	hi, _ = bits.Sub64(hi, bhi, borrow)
	return int(shr128(hi, lo, s.shift))
}

// allocateNext hands out the first free subnet at or after the candidate.
func (s *cidrSet) allocateNext() (netip.Prefix, error) {
	if s.inUse == s.count {
		return netip.Prefix{}, fmt.Errorf("%w: %v", ErrCIDRRangeFull, s.base)
	}
	for n := 0; n < s.count; n++ {
		i := (s.next + n) % s.count
		if !s.isUsed(i) {
			s.set(i, true)
			s.next = (i + 1) % s.count
			return s.subnet(i), nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("%w: %v", ErrCIDRRangeFull, s.base)
}

// span returns the subnet numbers [first, last] that p covers; p may be
// larger or smaller than a node subnet, as upstream's Occupy allows.
func (s *cidrSet) span(p netip.Prefix) (int, int, error) {
	p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()).Masked()
	if p.Addr().Is4() != s.base.Addr().Is4() || p.Bits() < s.base.Bits() || !s.base.Contains(p.Addr()) {
		return 0, 0, fmt.Errorf("%w: %v not in %v", ErrOutOfRange, p, s.base)
	}
	first := s.index(p.Addr())
	last := first
	if p.Bits() < s.nodeBits {
		last = first + (1 << (s.nodeBits - p.Bits())) - 1
	}
	return first, last, nil
}

// occupy marks every subnet p overlaps as used.
func (s *cidrSet) occupy(p netip.Prefix) error {
	first, last, err := s.span(p)
	if err != nil {
		return err
	}
	for i := first; i <= last; i++ {
		s.set(i, true)
	}
	return nil
}

// release frees every subnet p overlaps.
func (s *cidrSet) release(p netip.Prefix) error {
	first, last, err := s.span(p)
	if err != nil {
		return err
	}
	for i := first; i <= last; i++ {
		s.set(i, false)
	}
	return nil
}

func addrToU128(a netip.Addr) (hi, lo uint64) {
	if a.Is4() {
		b := a.As4()
		return 0, uint64(b[0])<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3])
	}
	b := a.As16()
	for i := 0; i < 8; i++ {
		hi = hi<<8 | uint64(b[i])
		lo = lo<<8 | uint64(b[8+i])
	}
	return hi, lo
}

func u128ToAddr(hi, lo uint64, v4 bool) netip.Addr {
	if v4 {
		return netip.AddrFrom4([4]byte{byte(lo >> 24), byte(lo >> 16), byte(lo >> 8), byte(lo)})
	}
	var b [16]byte
	for i := 7; i >= 0; i-- {
		b[i], b[8+i] = byte(hi), byte(lo)
		hi, lo = hi>>8, lo>>8
	}
	return netip.AddrFrom16(b)
}

// shl128 returns x << n as a 128-bit number.
func shl128(x uint64, n uint) (hi, lo uint64) {
	switch {
	case n >= 128:
		return 0, 0
	case n >= 64:
		return x << (n - 64), 0
	case n == 0:
		return 0, x
	default:
		return x >> (64 - n), x << n
	}
}

// shr128 returns the low 64 bits of (hi,lo) >> n.
func shr128(hi, lo uint64, n uint) uint64 {
	switch {
	case n >= 128:
		return 0
	case n >= 64:
		return hi >> (n - 64)
	case n == 0:
		return lo
	default:
		return lo>>n | hi<<(64-n)
	}
}
