package clusterdns

import (
	"testing"
	"time"

	"github.com/miekg/dns"
)

// BenchmarkDNSServe: concurrent clients (16 per CPU, one UDP socket
// each) asking the server on loopback for a cluster name, a headless
// Service, a forwarded name that stays in the cache, and one forwarded
// every time (cache off) to the fake upstream in the same process;
// reports qps.
//
//	go test -run '^$' -bench DNSServe -benchtime 3s ./clusterdns
func BenchmarkDNSServe(b *testing.B) {
	up := startUpstream(b)
	ts, _ := startServer(b, []string{up.addr}, testObjects()...)
	uncached, _ := startServerWith(b, Config{Upstreams: []string{up.addr}, CacheSize: -1}, testObjects()...)
	for _, bc := range []struct {
		name     string
		addr     string
		qname    string
		upstream bool // every query goes to the upstream
	}{
		{"cluster", ts.addr, "nginx.default.svc.cluster.local.", false},
		{"headless", ts.addr, "web.default.svc.cluster.local.", false},
		{"forwarded-cached", ts.addr, "www.example.org.", false},
		{"forwarded-uncached", uncached.addr, "www.example.org.", true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			query(b, bc.addr, "udp", bc.qname, dns.TypeA) // fills the cache
			before := up.queries.Load()
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				c := &dns.Client{Net: "udp", Timeout: 5 * time.Second}
				conn, err := c.Dial(bc.addr)
				if err != nil {
					b.Error(err)
					return
				}
				defer conn.Close()
				m := new(dns.Msg)
				m.SetQuestion(bc.qname, dns.TypeA)
				for pb.Next() {
					m.Id = dns.Id()
					r, _, err := c.ExchangeWithConn(m, conn)
					if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
						b.Errorf("query %s: %v %v", bc.qname, err, r)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "qps")
			if n := up.queries.Load() - before; !bc.upstream && n != 0 {
				b.Errorf("the upstream was asked %d times during the run", n)
			}
		})
	}
}
