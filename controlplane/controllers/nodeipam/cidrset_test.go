package nodeipam

import (
	"errors"
	"net/netip"
	"testing"
)

func mustSet(t *testing.T, cidr string, bits int) *cidrSet {
	t.Helper()
	s, err := newCIDRSet(netip.MustParsePrefix(cidr), bits)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNewCIDRSetValidation(t *testing.T) {
	for _, tc := range []struct {
		cidr  string
		bits  int
		ok    bool
		count int
	}{
		{"10.244.0.0/16", 24, true, 256},
		{"10.244.7.9/16", 24, true, 256}, // host bits are masked off
		{"10.0.0.0/8", 24, true, 65536},
		{"10.0.0.0/8", 25, false, 0}, // more than 16 bits of subnets
		{"10.244.0.0/16", 16, true, 1},
		{"10.244.0.0/16", 15, false, 0},
		{"10.244.0.0/16", 33, false, 0},
		{"10.244.0.0/30", 32, true, 4},
		{"0.0.0.0/0", 16, true, 65536},
		{"fd00::/48", 64, true, 65536},
		{"fd00::/120", 128, true, 256},
		{"fd00::/64", 129, false, 0},
	} {
		s, err := newCIDRSet(netip.MustParsePrefix(tc.cidr), tc.bits)
		if (err == nil) != tc.ok {
			t.Errorf("%s /%d: err=%v, want ok=%v", tc.cidr, tc.bits, err, tc.ok)
			continue
		}
		if tc.ok && s.count != tc.count {
			t.Errorf("%s /%d: count %d, want %d", tc.cidr, tc.bits, s.count, tc.count)
		}
	}
}

func TestAllocateSequenceAndFull(t *testing.T) {
	s := mustSet(t, "10.244.0.0/22", 24)
	want := []string{"10.244.0.0/24", "10.244.1.0/24", "10.244.2.0/24", "10.244.3.0/24"}
	for _, w := range want {
		p, err := s.allocateNext()
		if err != nil || p.String() != w {
			t.Fatalf("allocate = %v, %v; want %s", p, err, w)
		}
	}
	if _, err := s.allocateNext(); !errors.Is(err, ErrCIDRRangeFull) {
		t.Fatalf("full range: err = %v", err)
	}
	if err := s.release(netip.MustParsePrefix("10.244.1.0/24")); err != nil {
		t.Fatal(err)
	}
	if p, _ := s.allocateNext(); p.String() != "10.244.1.0/24" {
		t.Fatalf("after release got %v", p)
	}
}

func TestRoundRobinAfterRelease(t *testing.T) {
	s := mustSet(t, "10.244.0.0/22", 24)
	a, _ := s.allocateNext()
	_, _ = s.allocateNext()
	_ = s.release(a)
	// The released subnet comes back only after the untouched ones.
	for _, w := range []string{"10.244.2.0/24", "10.244.3.0/24", "10.244.0.0/24"} {
		if p, _ := s.allocateNext(); p.String() != w {
			t.Fatalf("got %v, want %s", p, w)
		}
	}
}

func TestOccupyEdgeCases(t *testing.T) {
	s := mustSet(t, "10.244.0.0/16", 24)
	for _, tc := range []struct {
		cidr string
		err  error
		used int
	}{
		{"10.244.255.0/24", nil, 1}, // last subnet
		{"10.244.0.0/24", nil, 2},   // first subnet
		{"10.244.4.0/23", nil, 4},   // larger than a node subnet: two
		{"10.244.9.128/25", nil, 5}, // smaller: its containing subnet
		{"10.245.0.0/24", ErrOutOfRange, 5},
		{"10.0.0.0/8", ErrOutOfRange, 5}, // wider than the cluster
		{"fd00::/64", ErrOutOfRange, 5},
		{"10.244.255.0/24", nil, 5}, // idempotent
	} {
		err := s.occupy(netip.MustParsePrefix(tc.cidr))
		if !errors.Is(err, tc.err) {
			t.Errorf("occupy %s: err %v, want %v", tc.cidr, err, tc.err)
		}
		if s.inUse != tc.used {
			t.Errorf("after %s: in use %d, want %d", tc.cidr, s.inUse, tc.used)
		}
	}
	// Allocation skips occupied subnets.
	for _, w := range []string{"10.244.1.0/24", "10.244.2.0/24", "10.244.3.0/24", "10.244.6.0/24"} {
		if p, _ := s.allocateNext(); p.String() != w {
			t.Fatalf("got %v, want %s", p, w)
		}
	}
}

func TestSlash32AndIPv6(t *testing.T) {
	s := mustSet(t, "192.168.0.252/30", 32)
	var got []string
	for i := 0; i < 4; i++ {
		p, err := s.allocateNext()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p.String())
	}
	if got[3] != "192.168.0.255/32" {
		t.Fatalf("got %v", got)
	}
	s6 := mustSet(t, "fd00:10:244::/56", 64)
	_ = s6.occupy(netip.MustParsePrefix("fd00:10:244::/64"))
	if p, _ := s6.allocateNext(); p.String() != "fd00:10:244:1::/64" {
		t.Fatalf("ipv6 got %v", p)
	}
	s6.next = s6.count - 1
	if p, _ := s6.allocateNext(); p.String() != "fd00:10:244:ff::/64" {
		t.Fatalf("ipv6 last got %v", p)
	}
	// Top of the address space: no overflow.
	top := mustSet(t, "255.255.255.0/24", 28)
	top.next = top.count - 1
	if p, _ := top.allocateNext(); p.String() != "255.255.255.240/28" {
		t.Fatalf("top got %v", p)
	}
}

func TestAllocatorNodes(t *testing.T) {
	a, err := newAllocator("10.244.0.0/23, fd00::/63", 24, 64)
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.allocate("n1")
	if err != nil || len(got) != 2 || got[0].String() != "10.244.0.0/24" || got[1].String() != "fd00::/64" {
		t.Fatalf("n1: %v %v", got, err)
	}
	again, _ := a.allocate("n1")
	if again[0] != got[0] {
		t.Fatalf("second allocate for the same node changed: %v", again)
	}
	if _, err := a.allocate("n2"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.allocate("n3"); !errors.Is(err, ErrCIDRRangeFull) {
		t.Fatalf("n3: %v", err)
	}
	a.release("n1")
	if got, err := a.allocate("n3"); err != nil || got[0].String() != "10.244.0.0/24" {
		t.Fatalf("n3 after release: %v %v", got, err)
	}
	// A node that shows a different CIDR gives up what it was allocated.
	a.release("n2")
	if err := a.occupy("n3", []string{"10.244.1.0/24", "fd00:0:0:1::/64"}); err != nil {
		t.Fatal(err)
	}
	if got, err := a.allocate("n4"); err != nil || got[0].String() != "10.244.0.0/24" {
		t.Fatalf("n4: %v %v", got, err)
	}
	if err := a.occupy("n5", []string{"192.168.0.0/24"}); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("out of range occupy: %v", err)
	}
	for _, bad := range []string{"10.0.0.0/16,10.1.0.0/16", "nonsense", "10.0.0.0/16,fd00::/32"} {
		if _, err := newAllocator(bad, 24, 64); err == nil {
			t.Errorf("newAllocator(%q) accepted", bad)
		}
	}
}
