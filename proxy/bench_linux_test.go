package proxy

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// BenchmarkProxySync measures the time from an EndpointSlice change to
// the rules applied (Compute + one nft transaction + the route check) with
// 1,000 Services of 10 endpoints each (10,000 endpoints), in a throwaway
// namespace on the real kernel. Each iteration flips one endpoint's
// readiness, as a readiness probe would. It reports p50 and p99 per sync:
// "partial" is what the running proxy does (only the changed service's
// chains), "full" forces the rewrite of the whole table the proxy does at
// start and once an hour.
//
//	sudo go test ./proxy -run '^$' -bench BenchmarkProxySync -benchtime 100x
func BenchmarkProxySync(b *testing.B) {
	b.Run("partial", func(b *testing.B) { benchmarkProxySync(b, false) })
	b.Run("full", func(b *testing.B) { benchmarkProxySync(b, true) })
}

func benchmarkProxySync(b *testing.B, full bool) {
	ns := testNetns(b)
	const nSvc, perSvc = 1000, 10
	var services []*corev1.Service
	var eps []*discoveryv1.EndpointSlice
	for i := range nSvc {
		name := fmt.Sprintf("svc-%04d", i)
		services = append(services, svc(name, fmt.Sprintf("10.96.%d.%d", i/250, 1+i%250)))
		var list []ep
		for j := range perSvc {
			n := i*perSvc + j
			list = append(list, ep{ip: fmt.Sprintf("10.244.%d.%d", n/250, 1+n%250), node: "n1", ready: true})
		}
		eps = append(eps, slice(name, 8080, list...))
	}
	opts := Options{NodeName: "n1", NodeIPs: []netip.Addr{netip.MustParseAddr("10.0.0.1")},
		PodCIDR: netip.MustParsePrefix("10.244.0.0/16")}
	exec, err := NewExecutor(ns, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer exec.Close()
	b.Cleanup(func() { Cleanup(ns) })
	node := netip.MustParseAddr("10.0.0.1")
	// The first sync writes the 1,000 routes as well.
	start := time.Now()
	if err := exec.Apply(Compute(services, eps, opts), node); err != nil {
		b.Fatal(err)
	}
	b.Logf("first sync (table + 1,000 routes): %v", time.Since(start))
	var took []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		s := eps[i%nSvc].DeepCopy()
		r := s.Endpoints[0].Conditions.Ready
		*r = !*r
		eps[i%nSvc] = s
		if full {
			exec.applied = nil
		}
		start := time.Now()
		p := Compute(services, eps, opts)
		if err := exec.Apply(p, node); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(took)
	pct := func(q float64) time.Duration { return took[min(len(took)-1, int(q*float64(len(took))))] }
	b.ReportMetric(float64(pct(0.50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(pct(0.99).Microseconds())/1000, "p99-ms")
	// The planner alone, for the split.
	t0 := time.Now()
	p := Compute(services, eps, opts)
	b.Logf("Compute alone: %v (%d rules, %d targets); %d syncs: p50 %v p99 %v",
		time.Since(t0), len(p.Rules), len(p.Targets), len(took), pct(0.5), pct(0.99))
}

// BenchmarkConnectThroughClusterIP: TCP connection setup (connect, accept,
// close) from the node to a server on its own address, directly and
// through a ClusterIP, with the 1,000-service table loaded. The dispatch
// chain is linear, so the last service of 1,000 is the worst case.
//
//	sudo go test ./proxy -run '^$' -bench BenchmarkConnectThroughClusterIP
func BenchmarkConnectThroughClusterIP(b *testing.B) {
	const nSvc = 1000
	for _, tc := range []struct{ name, addr string }{
		{"direct", "10.0.0.1:8080"},
		{"clusterip-first", "10.96.0.1:80"},
		{"clusterip-last-of-1000", fmt.Sprintf("10.96.%d.%d:80", (nSvc-1)/250, 1+(nSvc-1)%250)},
	} {
		// A namespace each: connections in TIME_WAIT and their conntrack
		// entries would slow the next case down.
		b.Run(tc.name, func(b *testing.B) {
			ns := connectBenchNetns(b, nSvc)
			_, err := inNetns(b, ns, func() (struct{}, error) {
				for b.Loop() {
					c, err := net.Dial("tcp", tc.addr)
					if err != nil {
						return struct{}{}, err
					}
					c.Close()
				}
				return struct{}{}, nil
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	}
}

// connectBenchNetns is a namespace with nSvc services of 10 endpoints
// (the first and last served by a server on the node's 10.0.0.1:8080).
func connectBenchNetns(b *testing.B, nSvc int) string {
	ns := testNetns(b)
	var services []*corev1.Service
	var eps []*discoveryv1.EndpointSlice
	for i := range nSvc {
		name := fmt.Sprintf("svc-%04d", i)
		services = append(services, svc(name, fmt.Sprintf("10.96.%d.%d", i/250, 1+i%250)))
		var list []ep
		for j := range 10 {
			n := i*10 + j
			list = append(list, ep{ip: fmt.Sprintf("10.244.%d.%d", n/250, 1+n%250), ready: true})
		}
		if i == 0 || i == nSvc-1 {
			list = []ep{{ip: "10.0.0.1", ready: true}} // the local server
		}
		eps = append(eps, slice(name, 8080, list...))
	}
	node := netip.MustParseAddr("10.0.0.1")
	exec, err := NewExecutor(ns, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(exec.Close)
	b.Cleanup(func() { Cleanup(ns) })
	if err := exec.Apply(Compute(services, eps, Options{NodeIPs: []netip.Addr{node}, PodCIDR: netip.MustParsePrefix("10.244.0.0/16")}), node); err != nil {
		b.Fatal(err)
	}
	ln, err := inNetns(b, ns, func() (net.Listener, error) { return net.Listen("tcp", "10.0.0.1:8080") })
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ns
}
