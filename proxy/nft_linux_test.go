package proxy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	goruntime "runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/nodelet/nodelet/hosttools"
	"github.com/nodelet/nodelet/test/testkit"
)

// testNetns makes a network namespace for the test (lo up, a veth pair
// inside it giving the "node" 10.0.0.1/24 on nv0) and removes it when
// the test ends. It returns its path.
func testNetns(t testing.TB) string {
	t.Helper()
	testkit.RequireRoot(t, "ip netns, nftables")
	if err := hosttools.Check("ip", "nft", "nsenter"); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	rand.Read(b)
	name := "nlproxy-" + hex.EncodeToString(b)
	run := func(args ...string) {
		t.Helper()
		if out, err := hosttools.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	run("netns", "add", name)
	t.Cleanup(func() {
		if out, err := hosttools.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	run("-n", name, "link", "set", "lo", "up")
	run("-n", name, "link", "add", "nv0", "type", "veth", "peer", "name", "nv1")
	run("-n", name, "addr", "add", "10.0.0.1/24", "dev", "nv0")
	run("-n", name, "link", "set", "nv0", "up")
	run("-n", name, "link", "set", "nv1", "up")
	return "/run/netns/" + name
}

// inNetns runs f on a thread inside the namespace; the thread is never
// returned to Go's pool (it ends with the goroutine).
func inNetns[T any](t testing.TB, path string, f func() (T, error)) (T, error) {
	t.Helper()
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		goruntime.LockOSThread() // never unlocked: the thread dies with us
		var zero T
		h, err := netns.GetFromPath(path)
		if err != nil {
			ch <- result{zero, err}
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			ch <- result{zero, err}
			return
		}
		v, err := f()
		ch <- result{v, err}
	}()
	r := <-ch
	return r.v, r.err
}

func nftList(t testing.TB, ns string) (string, error) {
	t.Helper()
	out, err := hosttools.Command("nsenter", "--net="+ns, "nft", "list", "table", "ip", TableName).CombinedOutput()
	return string(out), err
}

// TestExecutorRealNftables applies a plan in a throwaway namespace, reads
// it back with nft, connects through it from the node itself (the output
// path: route, DNAT, reject), re-applies, and cleans up.
func TestExecutorRealNftables(t *testing.T) {
	ns := testNetns(t)
	node := netip.MustParseAddr("10.0.0.1")
	// The "endpoint": a server on the node's own address.
	ln, err := inNetns(t, ns, func() (net.Listener, error) { return net.Listen("tcp", "10.0.0.1:8080") })
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, "hello from endpoint\n")
			c.Close()
		}
	}()
	services := []*corev1.Service{
		svc("web", "10.96.0.10"),
		svc("empty", "10.96.0.11"),
		svc("dns", "10.96.0.53"),
		svc("np", "10.96.0.12", func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeNodePort
			s.Spec.Ports[0].NodePort = 30080
			s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		}),
		svc("sctp", "10.96.0.13", func(s *corev1.Service) { s.Spec.Ports[0].Protocol = corev1.ProtocolSCTP }),
	}
	two := []ep{{ip: "10.0.0.1", ready: true}, {ip: "10.0.0.2", ready: false}}
	slices := []*discoveryv1.EndpointSlice{slice("web", 8080, two...), slice("np", 8080, two...), slice("dns", 8080, two...)}
	opts := Options{NodeName: "n1", NodeIPs: []netip.Addr{node}, PodCIDR: netip.MustParsePrefix("10.244.1.0/24"),
		SkipClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.53")}}
	plan := Compute(services, slices, opts)

	exec, err := NewExecutor(ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Close()
	t.Cleanup(func() { Cleanup(ns) })
	if err := exec.Apply(plan, node); err != nil {
		t.Fatalf("apply: %v", err)
	}
	first, err := nftList(t, ns)
	if err != nil {
		t.Fatalf("nft list: %v: %s", err, first)
	}
	t.Logf("table:\n%s", first)
	for _, want := range []string{
		"10.96.0.10 . tcp . 80 : goto svc-",
		"10.96.0.11 . tcp . 80 : goto reject",
		"10.0.0.1 . tcp . 30080 : goto svc-",
		"ip daddr . meta l4proto . th dport vmap @service-ips",
		"ip saddr != 10.244.1.0/24 ip daddr . meta l4proto . th dport @masq-unless-from-pods meta mark set",
		"reject with tcp reset",
		"dnat to 10.0.0.1:8080",
		"masquerade fully-random",
		"flags dynamic,timeout",
		"timeout 3h",
	} {
		if !strings.Contains(first, want) {
			t.Errorf("table lacks %q", want)
		}
	}
	if strings.Contains(first, "10.96.0.53") {
		t.Errorf("the skipped DNS ClusterIP has rules")
	}
	routes, _ := exec2(ns, "ip", "route", "show", "proto", "158")
	for _, r := range []string{"10.96.0.10 dev nv0", "10.96.0.11 dev nv0", "10.96.0.12 dev nv0"} {
		if !strings.Contains(routes, r) {
			t.Errorf("routes %q lack %q", routes, r)
		}
	}
	if strings.Contains(routes, "10.96.0.53") {
		t.Errorf("route to the skipped DNS IP: %s", routes)
	}

	dial := func(addr string) (string, error) {
		return inNetns(t, ns, func() (string, error) {
			c, err := net.DialTimeout("tcp", addr, 2*time.Second)
			if err != nil {
				return "", err
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(2 * time.Second))
			b, err := io.ReadAll(c)
			return string(b), err
		})
	}
	for _, addr := range []string{"10.96.0.10:80", "10.0.0.1:30080", "10.96.0.12:80"} {
		if got, err := dial(addr); err != nil || got != "hello from endpoint\n" {
			t.Errorf("dial %s: %q, %v", addr, got, err)
		}
	}
	start := time.Now()
	if _, err := dial("10.96.0.11:80"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial the service without endpoints: %v, want connection refused", err)
	} else if d := time.Since(start); d > time.Second {
		t.Errorf("refused after %v", d)
	}

	// Idempotent: the same plan gives the same table, routes unchanged.
	if err := exec.Apply(plan, node); err != nil {
		t.Fatalf("re-apply: %v", err)
	}
	second, _ := nftList(t, ns)
	if normalizeHandles(first) != normalizeHandles(second) {
		t.Errorf("re-applied table differs:\n%s\n---\n%s", first, second)
	}
	routes2, _ := exec2(ns, "ip", "route", "show", "proto", "158")
	if routes2 != routes {
		t.Errorf("routes changed on re-apply: %q -> %q", routes, routes2)
	}

	// An endpoint change replaces the table: the service now refuses.
	plan = Compute(services, []*discoveryv1.EndpointSlice{slice("np", 8080, two...)}, opts)
	if err := exec.Apply(plan, node); err != nil {
		t.Fatal(err)
	}
	if _, err := dial("10.96.0.10:80"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial web after its endpoints went: %v, want connection refused", err)
	}
	// The service went: its route goes too.
	plan = Compute(services[1:], nil, opts)
	if err := exec.Apply(plan, node); err != nil {
		t.Fatal(err)
	}
	if routes, _ := exec2(ns, "ip", "route", "show", "proto", "158"); strings.Contains(routes, "10.96.0.10 ") {
		t.Errorf("route of a deleted service stays: %s", routes)
	}

	if err := Cleanup(ns); err != nil {
		t.Fatalf("cleanup: %v", err)
	}
	if err := Cleanup(ns); err != nil {
		t.Fatalf("second cleanup (idempotent): %v", err)
	}
	if out, err := nftList(t, ns); err == nil {
		t.Errorf("table left after cleanup:\n%s", out)
	}
	if routes, _ := exec2(ns, "ip", "route", "show", "proto", "158"); strings.TrimSpace(routes) != "" {
		t.Errorf("routes left after cleanup: %s", routes)
	}
	if tables, _ := exec2(ns, "nft", "list", "tables"); strings.TrimSpace(tables) != "" {
		t.Errorf("tables left: %s", tables)
	}
}

func exec2(ns string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := hosttools.CommandContext(ctx, "nsenter", append([]string{"--net=" + ns}, args...)...).CombinedOutput()
	return string(out), err
}

// normalizeHandles gives the table's chains and sets in name order: a
// partial sync adds chains in another order than a full write.
func normalizeHandles(s string) string {
	var blocks []string
	var cur []string
	for _, l := range strings.Split(s, "\n") {
		switch {
		case strings.HasPrefix(l, "\tchain ") || strings.HasPrefix(l, "\tset "):
			cur = []string{l}
		case l == "\t}" && cur != nil:
			blocks = append(blocks, sortElements(strings.Join(append(cur, l), "\n")))
			cur = nil
		case strings.Contains(l, " expires "):
			// Affinity entries the traffic added; not the sync's doing.
		case cur != nil:
			cur = append(cur, l)
		}
	}
	slices.Sort(blocks)
	return strings.Join(blocks, "\n")
}

// sortElements puts the elements of a set block in order (the kernel
// lists a hash set's elements in hash order).
func sortElements(block string) string {
	i := strings.Index(block, "elements = {")
	if i < 0 {
		return block
	}
	j := strings.Index(block[i:], "}")
	items := strings.Split(block[i+len("elements = {"):i+j], ",")
	for k := range items {
		items[k] = strings.Join(strings.Fields(items[k]), " ")
	}
	slices.Sort(items)
	return block[:i] + "elements = {" + strings.Join(items, ", ") + block[i+j:]
}

// TestExecutorPartialSyncMatchesFull: a partial sync (endpoints added and
// removed, affinity changed, a service gone, one new, one emptied) leaves
// the same table as a full write of the new plan.
func TestExecutorPartialSyncMatchesFull(t *testing.T) {
	ns := testNetns(t)
	node := netip.MustParseAddr("10.0.0.1")
	opts := Options{NodeName: "n1", NodeIPs: []netip.Addr{node}, PodCIDR: netip.MustParsePrefix("10.244.1.0/24")}
	aff := func(sec int32) func(*corev1.Service) {
		return func(s *corev1.Service) {
			s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: &sec}}
		}
	}
	eps := func(n int) []ep {
		var out []ep
		for i := range n {
			out = append(out, ep{ip: fmt.Sprintf("10.244.1.%d", 10+i), ready: true})
		}
		return out
	}
	before := Compute(
		[]*corev1.Service{svc("a", "10.96.0.1"), svc("b", "10.96.0.2", aff(60)), svc("c", "10.96.0.3"), svc("d", "10.96.0.4", aff(60))},
		[]*discoveryv1.EndpointSlice{slice("a", 80, eps(3)...), slice("b", 80, eps(3)...), slice("c", 80, eps(2)...), slice("d", 80, eps(4)...)}, opts)
	after := Compute(
		[]*corev1.Service{svc("a", "10.96.0.1"), svc("b", "10.96.0.2", aff(30)), svc("d", "10.96.0.4", aff(60)), svc("e", "10.96.0.5")},
		[]*discoveryv1.EndpointSlice{slice("a", 80, eps(5)...), slice("b", 80, eps(1)...), slice("d", 80, eps(2)...), slice("e", 80, eps(2)...)}, opts)
	partial, err := NewExecutor(ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer partial.Close()
	t.Cleanup(func() { Cleanup(ns) })
	if err := partial.Apply(before, node); err != nil {
		t.Fatal(err)
	}
	if err := partial.Apply(after, node); err != nil {
		t.Fatal(err)
	}
	if partial.fullWrites != 1 || partial.partialWrites != 1 {
		t.Fatalf("%d full and %d partial writes, want 1 and 1 (a failed partial sync falls back to a full one)", partial.fullWrites, partial.partialWrites)
	}
	got, err := nftList(t, ns)
	if err != nil {
		t.Fatal(err)
	}
	full, err := NewExecutor(ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	if err := full.Apply(after, node); err != nil {
		t.Fatal(err)
	}
	want, _ := nftList(t, ns)
	if normalizeHandles(got) != normalizeHandles(want) {
		t.Fatalf("partial sync:\n%s\nfull write:\n%s", got, want)
	}
	if strings.Contains(got, "10.96.0.3") || !strings.Contains(got, "timeout 30s") || strings.Contains(got, "svc-"+targetName("svc", "ns/c:http", TCP)[4:]) {
		t.Fatalf("table after the partial sync:\n%s", got)
	}
}

// TestExecutorManyServices: a map's elements beyond one netlink
// attribute's 64 KiB go in several messages of the same transaction.
func TestExecutorManyServices(t *testing.T) {
	ns := testNetns(t)
	node := netip.MustParseAddr("10.0.0.1")
	var services []*corev1.Service
	var eps []*discoveryv1.EndpointSlice
	for i := range 3000 {
		name := fmt.Sprintf("s%04d", i)
		services = append(services, svc(name, fmt.Sprintf("10.96.%d.%d", i/250, 1+i%250)))
		if i%2 == 0 {
			eps = append(eps, slice(name, 80, ep{ip: fmt.Sprintf("10.244.%d.%d", i/250, 1+i%250), ready: true}))
		}
	}
	e, err := NewExecutor(ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	t.Cleanup(func() { Cleanup(ns) })
	if err := e.Apply(Compute(services, eps, Options{NodeIPs: []netip.Addr{node}}), node); err != nil {
		t.Fatal(err)
	}
	for m, want := range map[string]int{mapServiceIPs: 1500, mapNoEndpoints: 1500} {
		out, err := exec2(ns, "nft", "list", "map", "ip", TableName, m)
		if err != nil {
			t.Fatalf("nft list map %s: %v: %s", m, err, out)
		}
		if got := strings.Count(out, " : ") - 1; got != want { // minus the type line
			t.Errorf("map %s has %d elements, want %d", m, got, want)
		}
	}
}

// TestExecutorIPv6: the ip6 table (16-byte addresses in the dispatch
// keys) is accepted and answers, from the node itself, through a ClusterIP.
func TestExecutorIPv6(t *testing.T) {
	ns := testNetns(t)
	if out, err := exec2(ns, "ip", "-6", "addr", "add", "fd00::1/64", "dev", "nv0", "nodad"); err != nil {
		t.Fatalf("add fd00::1: %v: %s", err, out)
	}
	node := netip.MustParseAddr("fd00::1")
	ln, err := inNetns(t, ns, func() (net.Listener, error) { return net.Listen("tcp", "[fd00::1]:8080") })
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, "v6\n")
			c.Close()
		}
	}()
	s6 := &discoveryv1.EndpointSlice{}
	*s6 = *slice("web", 8080, ep{ip: "fd00::1", ready: true})
	s6.AddressType = discoveryv1.AddressTypeIPv6
	plan := Compute([]*corev1.Service{svc("web", "fd00:96::10"), svc("empty", "fd00:96::11")}, []*discoveryv1.EndpointSlice{s6},
		Options{NodeIPs: []netip.Addr{node}, PodCIDR: netip.MustParsePrefix("fd00:244::/64"), Is6: true})
	e, err := NewExecutor(ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	t.Cleanup(func() { Cleanup(ns) })
	if err := e.Apply(plan, node); err != nil {
		t.Fatal(err)
	}
	out, err := exec2(ns, "nft", "list", "table", "ip6", TableName)
	if err != nil || !strings.Contains(out, "fd00:96::10 . tcp . 80 : goto svc-") || !strings.Contains(out, "fd00:96::11 . tcp . 80 : goto reject") {
		t.Fatalf("ip6 table: %v:\n%s", err, out)
	}
	dial := func(addr string) (string, error) {
		return inNetns(t, ns, func() (string, error) {
			c, err := net.DialTimeout("tcp", addr, 2*time.Second)
			if err != nil {
				return "", err
			}
			defer c.Close()
			b, err := io.ReadAll(c)
			return string(b), err
		})
	}
	if got, err := dial("[fd00:96::10]:80"); err != nil || got != "v6\n" {
		t.Errorf("dial the v6 ClusterIP: %q, %v\n%s", got, err, out)
	}
	if _, err := dial("[fd00:96::11]:80"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial the v6 service without endpoints: %v, want connection refused", err)
	}
	if err := Cleanup(ns); err != nil {
		t.Fatal(err)
	}
	if tables, _ := exec2(ns, "nft", "list", "tables"); strings.TrimSpace(tables) != "" {
		t.Errorf("tables left: %s", tables)
	}
}

// TestExecutorUDP: a UDP ClusterIP DNATs to its endpoint; one without
// endpoints is refused at once.
func TestExecutorUDP(t *testing.T) {
	ns := testNetns(t)
	node := netip.MustParseAddr("10.0.0.1")
	pc, err := inNetns(t, ns, func() (net.PacketConn, error) { return net.ListenPacket("udp", "10.0.0.1:5353") })
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go func() {
		buf := make([]byte, 100)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(append([]byte("echo "), buf[:n]...), from)
		}
	}()
	udp := func(s *corev1.Service) { s.Spec.Ports[0].Protocol = corev1.ProtocolUDP; s.Spec.Ports[0].Port = 53 }
	sl := slice("dns", 5353, ep{ip: "10.0.0.1", ready: true})
	sl.Ports[0].Protocol = ptrTo(corev1.ProtocolUDP)
	plan := Compute([]*corev1.Service{svc("dns", "10.96.0.20", udp), svc("none", "10.96.0.21", udp)},
		[]*discoveryv1.EndpointSlice{sl}, Options{NodeIPs: []netip.Addr{node}, PodCIDR: netip.MustParsePrefix("10.244.1.0/24")})
	e, err := NewExecutor(ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	t.Cleanup(func() { Cleanup(ns) })
	if err := e.Apply(plan, node); err != nil {
		t.Fatal(err)
	}
	ask := func(addr string) (string, error) {
		return inNetns(t, ns, func() (string, error) {
			c, err := net.Dial("udp", addr)
			if err != nil {
				return "", err
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(2 * time.Second))
			if _, err := c.Write([]byte("hi")); err != nil {
				return "", err
			}
			buf := make([]byte, 100)
			n, err := c.Read(buf)
			return string(buf[:n]), err
		})
	}
	if got, err := ask("10.96.0.20:53"); err != nil || got != "echo hi" {
		t.Errorf("UDP through the ClusterIP: %q, %v", got, err)
	}
	// A client keeping its socket: once its endpoint is replaced, its
	// conntrack entry goes, and the next datagram reaches the new one.
	pc2, err := inNetns(t, ns, func() (net.PacketConn, error) { return net.ListenPacket("udp", "10.0.0.1:5354") })
	if err != nil {
		t.Fatal(err)
	}
	defer pc2.Close()
	go func() {
		buf := make([]byte, 100)
		for {
			n, from, err := pc2.ReadFrom(buf)
			if err != nil {
				return
			}
			pc2.WriteTo(append([]byte("new "), buf[:n]...), from)
		}
	}()
	conn, err := inNetns(t, ns, func() (net.Conn, error) { return net.Dial("udp", "10.96.0.20:53") })
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	exchange := func(msg string) string {
		buf := make([]byte, 100)
		if _, err := conn.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		return string(buf[:n])
	}
	if got := exchange("1"); got != "echo 1" {
		t.Fatalf("first datagram: %q", got)
	}
	moved := slice("dns", 5354, ep{ip: "10.0.0.1", ready: true})
	moved.Ports[0].Protocol = ptrTo(corev1.ProtocolUDP)
	if err := e.Apply(Compute([]*corev1.Service{svc("dns", "10.96.0.20", udp), svc("none", "10.96.0.21", udp)},
		[]*discoveryv1.EndpointSlice{moved}, Options{NodeIPs: []netip.Addr{node}, PodCIDR: netip.MustParsePrefix("10.244.1.0/24")}), node); err != nil {
		t.Fatal(err)
	}
	if got := exchange("2"); got != "new 2" {
		t.Errorf("after the endpoint moved, the kept socket got %q from the old one: stale conntrack entry", got)
	}

	// From the node itself the reject in the output hook fails the send
	// with EPERM (the ICMP error is for the pods' forwarded traffic, which
	// reads ECONNREFUSED): at once either way, no timeout.
	start := time.Now()
	if _, err := ask("10.96.0.21:53"); !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.EPERM) || time.Since(start) > time.Second {
		t.Errorf("UDP to the service without endpoints: %v after %v, want an immediate refusal", err, time.Since(start))
	}
}

func ptrTo[T any](v T) *T { return &v }
