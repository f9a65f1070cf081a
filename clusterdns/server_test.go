package clusterdns

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/test/testkit"
)

// The tests' cluster: a ClusterIP Service (dual-stack), a headless one
// with a hostname endpoint, a not-ready one and one without hostname, an
// ExternalName (out of and in the zone), and the kubernetes Service.
func testObjects() []runtime.Object {
	svc := func(ns, name, ip string, ports ...corev1.ServicePort) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.ServiceSpec{ClusterIP: ip, Ports: ports}}
		if ip != "" {
			s.Spec.ClusterIPs = []string{ip}
		}
		return s
	}
	nginx := svc("default", "nginx", "10.96.0.20", corev1.ServicePort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP},
		corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP})
	nginx.Spec.ClusterIPs = []string{"10.96.0.20", "fd00:96::20"}
	ext := svc("default", "ext", "")
	ext.Spec.Type, ext.Spec.ExternalName = corev1.ServiceTypeExternalName, "www.example.org"
	extIn := svc("default", "ext-in", "")
	extIn.Spec.Type, extIn.Spec.ExternalName = corev1.ServiceTypeExternalName, "nginx.default.svc.cluster.local"
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "web-abc", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.244.0.5"}, Hostname: ptr.To("web-0"), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
			{Addresses: []string{"10.244.0.6"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
			{Addresses: []string{"10.244.0.9"}, Hostname: ptr.To("web-2"), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}},
		},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(8080)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	return []runtime.Object{
		svc("default", "kubernetes", "10.96.0.1", corev1.ServicePort{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP}),
		nginx, ext, extIn, svc("default", "web", corev1.ClusterIPNone), svc("default", "empty", corev1.ClusterIPNone), slice,
	}
}

// fakeUpstream is a resolver on loopback (UDP and TCP, one port) that
// answers <anything>.example.org. A 192.0.2.1 (TTL 60; slow.example.org.
// after 300 ms), big.example.org. with 100 A records (truncated over UDP),
// and NXDOMAIN otherwise.
type fakeUpstream struct {
	addr    string
	queries atomic.Int64
	mu      sync.Mutex
	seen    []string // "udp big.example.org." ...
}

func startUpstream(t testing.TB) *fakeUpstream {
	t.Helper()
	u := &fakeUpstream{}
	var pc net.PacketConn
	var ln net.Listener
	for range 20 {
		var err error
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if ln, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			break
		}
		pc.Close()
		pc = nil
	}
	if pc == nil {
		t.Fatal("no port free for UDP and TCP")
	}
	u.addr = pc.LocalAddr().String()
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		u.queries.Add(1)
		q := r.Question[0]
		_, udp := w.LocalAddr().(*net.UDPAddr)
		u.mu.Lock()
		u.seen = append(u.seen, map[bool]string{true: "udp ", false: "tcp "}[udp]+q.Name)
		u.mu.Unlock()
		m := new(dns.Msg)
		m.SetReply(r)
		m.RecursionAvailable = true
		if q.Name == "slow.example.org." {
			time.Sleep(300 * time.Millisecond)
		}
		switch {
		case q.Name == "big.example.org." && q.Qtype == dns.TypeA:
			for i := range 100 {
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
					A: net.IPv4(192, 0, 2, byte(i+1))})
			}
		case strings.HasSuffix(q.Name, "example.org.") && q.Qtype == dns.TypeA:
			m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(192, 0, 2, 1)}}
		case strings.HasSuffix(q.Name, "example.org."):
			m.Ns = []dns.RR{&dns.SOA{Hdr: dns.RR_Header{Name: "example.org.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 30},
				Ns: "ns.example.org.", Mbox: "h.example.org.", Minttl: 30}}
		default:
			m.Rcode = dns.RcodeNameError
			m.Ns = []dns.RR{&dns.SOA{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 30},
				Ns: "a.root.", Mbox: "h.root.", Minttl: 30}}
		}
		if opt := r.IsEdns0(); opt != nil {
			m.SetEdns0(opt.UDPSize(), false)
		}
		if udp {
			size := dns.MinMsgSize
			if opt := r.IsEdns0(); opt != nil {
				size = int(opt.UDPSize())
			}
			m.Truncate(size)
		}
		w.WriteMsg(m)
	})
	us, ts := &dns.Server{PacketConn: pc, Handler: h}, &dns.Server{Listener: ln, Handler: h}
	startServers(t, us, ts)
	return u
}

func startServers(t testing.TB, servers ...*dns.Server) {
	t.Helper()
	var wg sync.WaitGroup
	for _, s := range servers {
		started := make(chan struct{})
		s.NotifyStartedFunc = func() { close(started) }
		wg.Go(func() { s.ActivateAndServe() })
		<-started
	}
	t.Cleanup(func() {
		for _, s := range servers {
			s.Shutdown()
		}
		wg.Wait()
	})
}

// testServer runs a Server over the fake clientset's informers on
// 127.0.0.1 (UDP and TCP on one port) and returns its address.
type testServer struct {
	addr  string
	srv   *Server
	clock *fakeClock
}

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.now = c.now.Add(d) }

func startServer(t testing.TB, upstreams []string, objs ...runtime.Object) (*testServer, *fake.Clientset) {
	t.Helper()
	return startServerWith(t, Config{Upstreams: upstreams}, objs...)
}

// startServerWith takes the Config's Upstreams and CacheSize.
func startServerWith(t testing.TB, cfg Config, objs ...runtime.Object) (*testServer, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset(objs...)
	f := informers.NewSharedInformerFactory(client, 0)
	src, err := NewInformerSource(f)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); f.Shutdown() })
	if !src.Start(ctx) {
		t.Fatal("informers did not sync")
	}
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	srv, err := New(Config{Domain: "cluster.local", Source: src, Upstreams: cfg.Upstreams, CacheSize: cfg.CacheSize, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	pcs, lns := listenLoopback(t)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, pcs, lns) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &testServer{addr: pcs[0].LocalAddr().String(), srv: srv, clock: clock}, client
}

func listenLoopback(t testing.TB) ([]net.PacketConn, []net.Listener) {
	t.Helper()
	for range 20 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			return []net.PacketConn{pc}, []net.Listener{ln}
		}
		pc.Close()
	}
	t.Fatal("no port free for UDP and TCP")
	return nil, nil
}

func query(t testing.TB, addr, network, name string, qtype uint16) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	c := &dns.Client{Net: network, Timeout: 5 * time.Second}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("query %s %s over %s: %v", name, dns.TypeToString[qtype], network, err)
	}
	return r
}

// answers renders the answer section as "TYPE value" lines, sorted.
func answers(rrs []dns.RR) []string {
	var out []string
	for _, rr := range rrs {
		s := dns.TypeToString[rr.Header().Rrtype] + " "
		switch v := rr.(type) {
		case *dns.A:
			s += v.A.String()
		case *dns.AAAA:
			s += v.AAAA.String()
		case *dns.CNAME:
			s += v.Target
		case *dns.PTR:
			s += v.Ptr
		case *dns.SRV:
			s += fmt.Sprintf("%d %d %d %s", v.Priority, v.Weight, v.Port, v.Target)
		case *dns.TXT:
			s += strings.Join(v.Txt, " ")
		case *dns.SOA:
			s += v.Ns
		default:
			s += rr.String()
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

func TestClusterRecords(t *testing.T) {
	up := startUpstream(t)
	ts, _ := startServer(t, []string{up.addr}, testObjects()...)
	const d = ".default.svc.cluster.local."
	for _, tc := range []struct {
		name   string
		qtype  uint16
		rcode  int
		answer []string
		extra  []string
	}{
		{"kubernetes" + d, dns.TypeA, dns.RcodeSuccess, []string{"A 10.96.0.1"}, nil},
		// "kubernetes.default" from a pod in default: the search list's
		// first candidate is NXDOMAIN (so the resolver goes on), the second
		// answers.
		{"kubernetes.default.default.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, nil, nil},
		{"kubernetes.default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"A 10.96.0.1"}, nil},
		{"NGINX.Default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"A 10.96.0.20"}, nil},
		{"nginx" + d, dns.TypeAAAA, dns.RcodeSuccess, []string{"AAAA fd00:96::20"}, nil},
		{"kubernetes" + d, dns.TypeAAAA, dns.RcodeSuccess, nil, nil}, // NODATA
		{"nginx" + d, dns.TypeTXT, dns.RcodeSuccess, nil, nil},
		// Headless: the ready endpoints, by name too.
		{"web" + d, dns.TypeA, dns.RcodeSuccess, []string{"A 10.244.0.5", "A 10.244.0.6"}, nil},
		{"web-0.web" + d, dns.TypeA, dns.RcodeSuccess, []string{"A 10.244.0.5"}, nil},
		{"10-244-0-6.web" + d, dns.TypeA, dns.RcodeSuccess, []string{"A 10.244.0.6"}, nil},
		{"web-2.web" + d, dns.TypeA, dns.RcodeNameError, nil, nil}, // not ready
		{"empty" + d, dns.TypeA, dns.RcodeNameError, nil, nil},     // no ready endpoint (spec 2.4.1)
		{"web" + d, dns.TypeAAAA, dns.RcodeSuccess, nil, nil},
		// SRV of named ports.
		{"_http._tcp.nginx" + d, dns.TypeSRV, dns.RcodeSuccess, []string{"SRV 0 100 80 nginx.default.svc.cluster.local."}, []string{"A 10.96.0.20"}},
		{"_dns._udp.nginx" + d, dns.TypeSRV, dns.RcodeSuccess, []string{"SRV 0 100 53 nginx.default.svc.cluster.local."}, []string{"A 10.96.0.20"}},
		{"_dns._tcp.nginx" + d, dns.TypeSRV, dns.RcodeNameError, nil, nil},
		{"_tcp.nginx" + d, dns.TypeSRV, dns.RcodeSuccess, nil, nil}, // empty non-terminal
		{"_http._tcp.web" + d, dns.TypeSRV, dns.RcodeSuccess,
			[]string{"SRV 0 50 8080 10-244-0-6.web.default.svc.cluster.local.", "SRV 0 50 8080 web-0.web.default.svc.cluster.local."},
			[]string{"A 10.244.0.5", "A 10.244.0.6"}},
		// ExternalName: a CNAME, chased through the upstream or the zone.
		{"ext" + d, dns.TypeA, dns.RcodeSuccess, []string{"A 192.0.2.1", "CNAME www.example.org."}, nil},
		{"ext" + d, dns.TypeCNAME, dns.RcodeSuccess, []string{"CNAME www.example.org."}, nil},
		{"ext-in" + d, dns.TypeA, dns.RcodeSuccess, []string{"A 10.96.0.20", "CNAME nginx.default.svc.cluster.local."}, nil},
		// Pods.
		{"10-244-0-7.default.pod.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"A 10.244.0.7"}, nil},
		{"10-244-0-7.other.pod.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"A 10.244.0.7"}, nil}, // any address (spec 2.6)
		{"fd00-244--7.default.pod.cluster.local.", dns.TypeAAAA, dns.RcodeSuccess, []string{"AAAA fd00:244::7"}, nil},
		{"10-244-0-7.default.pod.cluster.local.", dns.TypeAAAA, dns.RcodeSuccess, nil, nil},
		{"10-244-0-300.default.pod.cluster.local.", dns.TypeA, dns.RcodeNameError, nil, nil},
		{"x.10-244-0-7.default.pod.cluster.local.", dns.TypeA, dns.RcodeNameError, nil, nil},
		// PTR.
		{"20.0.96.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, []string{"PTR nginx.default.svc.cluster.local."}, nil},
		{"5.0.244.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, []string{"PTR web-0.web.default.svc.cluster.local."}, nil},
		{"6.0.244.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, []string{"PTR 10-244-0-6.web.default.svc.cluster.local."}, nil},
		{mustReverse(t, "fd00:96::20"), dns.TypePTR, dns.RcodeSuccess, []string{"PTR nginx.default.svc.cluster.local."}, nil},
		{"99.0.96.10.in-addr.arpa.", dns.TypePTR, dns.RcodeNameError, nil, nil}, // unknown: forwarded
		// The tree: NODATA for names that exist, NXDOMAIN for others.
		{"nope" + d, dns.TypeA, dns.RcodeNameError, nil, nil},
		{"default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, nil, nil},
		{"nowhere.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, nil, nil},
		{"svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, nil, nil},
		{"cluster.local.", dns.TypeA, dns.RcodeSuccess, nil, nil},
		{"cluster.local.", dns.TypeSOA, dns.RcodeSuccess, []string{"SOA ns.dns.cluster.local."}, nil},
		{"foo.cluster.local.", dns.TypeA, dns.RcodeNameError, nil, nil},
		{"a.b.nginx" + d, dns.TypeA, dns.RcodeNameError, nil, nil},
		{"dns-version.cluster.local.", dns.TypeTXT, dns.RcodeSuccess, []string{"TXT 1.1.0"}, nil},
	} {
		t.Run(tc.name+"/"+dns.TypeToString[tc.qtype], func(t *testing.T) {
			r := query(t, ts.addr, "udp", tc.name, tc.qtype)
			if r.Rcode != tc.rcode {
				t.Fatalf("rcode %s, want %s: %v", dns.RcodeToString[r.Rcode], dns.RcodeToString[tc.rcode], r)
			}
			if got := answers(r.Answer); !slices.Equal(got, tc.answer) {
				t.Errorf("answer %q, want %q", got, tc.answer)
			}
			if got := answers(r.Extra); !slices.Equal(got, tc.extra) {
				t.Errorf("extra %q, want %q", got, tc.extra)
			}
			inZone := strings.HasSuffix(strings.ToLower(tc.name), "cluster.local.")
			if inZone && !r.Authoritative {
				t.Errorf("not authoritative")
			}
			// NXDOMAIN and NODATA carry the zone's SOA (negative TTL 5).
			if inZone && len(r.Answer) == 0 {
				if len(r.Ns) != 1 || r.Ns[0].(*dns.SOA).Minttl != DefaultTTL {
					t.Errorf("authority %v, want the zone's SOA", r.Ns)
				}
			}
			if len(r.Answer) > 0 && r.Answer[0].Header().Name != tc.name {
				t.Errorf("owner %s, want the asked name %s", r.Answer[0].Header().Name, tc.name)
			}
			for _, rr := range r.Answer {
				if inZone && rr.Header().Name == tc.name && rr.Header().Ttl != DefaultTTL {
					t.Errorf("record %v: want TTL %d", rr, DefaultTTL)
				}
			}
		})
	}
}

func mustReverse(t testing.TB, ip string) string {
	r, err := dns.ReverseAddr(ip)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Records follow the informers: a Service created later resolves, a
// deleted one stops resolving.
func TestRecordsFollowInformers(t *testing.T) {
	ts, client := startServer(t, nil, testObjects()...)
	ctx := context.Background()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "api"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.77", ClusterIPs: []string{"10.96.0.77"}}}
	if _, err := client.CoreV1().Services("team").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "api.team in the answers", func() bool {
		return slices.Equal(answers(query(t, ts.addr, "udp", "api.team.svc.cluster.local.", dns.TypeA).Answer), []string{"A 10.96.0.77"})
	})
	if err := client.CoreV1().Services("team").Delete(ctx, "api", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "api.team gone (NXDOMAIN)", func() bool {
		return query(t, ts.addr, "udp", "api.team.svc.cluster.local.", dns.TypeA).Rcode == dns.RcodeNameError
	})
}

// Other names go to the upstream, are cached for their TTL (counted down)
// and asked again once it has passed; negative answers are cached for the
// SOA's TTL.
func TestForwardAndCache(t *testing.T) {
	up := startUpstream(t)
	ts, _ := startServer(t, []string{up.addr}, testObjects()...)
	r := query(t, ts.addr, "udp", "www.example.org.", dns.TypeA)
	if got := answers(r.Answer); !slices.Equal(got, []string{"A 192.0.2.1"}) || r.Answer[0].Header().Ttl != 60 || !r.RecursionAvailable {
		t.Fatalf("answer %v", r)
	}
	if n := up.queries.Load(); n != 1 {
		t.Fatalf("upstream asked %d times, want 1", n)
	}
	ts.clock.Add(20 * time.Second)
	r = query(t, ts.addr, "tcp", "WWW.example.org.", dns.TypeA)
	if len(r.Answer) != 1 || r.Answer[0].Header().Ttl != 40 || r.Answer[0].Header().Name != "WWW.example.org." && r.Question[0].Name != "WWW.example.org." {
		t.Fatalf("cached answer %v, want TTL 40", r)
	}
	if n := up.queries.Load(); n != 1 {
		t.Fatalf("upstream asked %d times, want 1 (cached)", n)
	}
	ts.clock.Add(41 * time.Second)
	query(t, ts.addr, "udp", "www.example.org.", dns.TypeA)
	if n := up.queries.Load(); n != 2 {
		t.Fatalf("upstream asked %d times after the TTL, want 2", n)
	}
	// Negative: NXDOMAIN cached for the SOA's 30 s.
	for range 3 {
		if r := query(t, ts.addr, "udp", "nonexistent.test.", dns.TypeA); r.Rcode != dns.RcodeNameError {
			t.Fatalf("rcode %s, want NXDOMAIN", dns.RcodeToString[r.Rcode])
		}
	}
	if n := up.queries.Load(); n != 3 {
		t.Fatalf("upstream asked %d times, want 3 (NXDOMAIN cached)", n)
	}
	ts.clock.Add(31 * time.Second)
	query(t, ts.addr, "udp", "nonexistent.test.", dns.TypeA)
	if n := up.queries.Load(); n != 4 {
		t.Fatalf("upstream asked %d times, want 4", n)
	}
}

// Clients asking the same name at once (a cache miss) cost one upstream
// query.
func TestForwardOnceForConcurrentQueries(t *testing.T) {
	up := startUpstream(t)
	ts, _ := startServer(t, []string{up.addr}, testObjects()...)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			m := new(dns.Msg)
			m.SetQuestion("slow.example.org.", dns.TypeA)
			r, _, err := (&dns.Client{Timeout: 5 * time.Second}).Exchange(m, ts.addr)
			if err != nil || len(r.Answer) != 1 {
				t.Errorf("query: %v %v", err, r)
			}
		})
	}
	wg.Wait()
	if n := up.queries.Load(); n != 1 {
		t.Fatalf("upstream asked %d times for 20 concurrent queries, want 1", n)
	}
}

// A big answer: the upstream truncates over UDP, so the server asks again
// over TCP; a UDP client without EDNS gets TC and retries over TCP.
func TestTruncation(t *testing.T) {
	up := startUpstream(t)
	ts, _ := startServer(t, []string{up.addr}, testObjects()...)
	r := query(t, ts.addr, "udp", "big.example.org.", dns.TypeA)
	if !r.Truncated || len(r.Answer) >= 100 {
		t.Fatalf("UDP answer: truncated %v with %d records, want TC", r.Truncated, len(r.Answer))
	}
	up.mu.Lock()
	seen := slices.Clone(up.seen)
	up.mu.Unlock()
	if !slices.Equal(seen, []string{"udp big.example.org.", "tcp big.example.org."}) {
		t.Errorf("upstream saw %q, want UDP then TCP", seen)
	}
	r = query(t, ts.addr, "tcp", "big.example.org.", dns.TypeA)
	if r.Truncated || len(r.Answer) != 100 {
		t.Fatalf("TCP answer: truncated %v with %d records, want 100", r.Truncated, len(r.Answer))
	}
	// The client's dns.Client retries over TCP by itself when asked to.
	m := new(dns.Msg)
	m.SetQuestion("big.example.org.", dns.TypeA)
	m.SetEdns0(4096, false)
	r, _, err := (&dns.Client{Net: "udp"}).Exchange(m, ts.addr)
	if err != nil || r.Truncated || len(r.Answer) != 100 {
		t.Fatalf("EDNS 4096 over UDP: %v, truncated %v, %d records", err, r != nil && r.Truncated, len(r.Answer))
	}
}

// A headless Service with many endpoints is truncated over UDP too.
func TestLocalTruncation(t *testing.T) {
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "many-x", Labels: map[string]string{discoveryv1.LabelServiceName: "many"}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for i := range 80 {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.244.1.%d", i+1)}})
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "many"}, Spec: corev1.ServiceSpec{ClusterIP: "None"}}
	ts, _ := startServer(t, nil, svc, slice)
	if r := query(t, ts.addr, "udp", "many.default.svc.cluster.local.", dns.TypeA); !r.Truncated {
		t.Fatalf("UDP: %d records, not truncated", len(r.Answer))
	}
	if r := query(t, ts.addr, "tcp", "many.default.svc.cluster.local.", dns.TypeA); r.Truncated || len(r.Answer) != 80 {
		t.Fatalf("TCP: %d records, truncated %v", len(r.Answer), r.Truncated)
	}
}

// Without a working upstream, other names fail (SERVFAIL) and cluster
// names still resolve.
func TestNoUpstream(t *testing.T) {
	ts, _ := startServer(t, nil, testObjects()...)
	if r := query(t, ts.addr, "udp", "www.example.org.", dns.TypeA); r.Rcode != dns.RcodeServerFailure {
		t.Fatalf("rcode %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
	if r := query(t, ts.addr, "udp", "kubernetes.default.svc.cluster.local.", dns.TypeA); len(r.Answer) != 1 {
		t.Fatalf("cluster name: %v", r)
	}
}

func TestUpstreams(t *testing.T) {
	conf := "# comment\nsearch example.org\nnameserver 10.96.0.10\nnameserver 127.0.0.53 ; local\nnameserver fe80::1%eth0\nnameserver bogus\noptions ndots:2\n"
	got := Upstreams([]byte(conf), []netip.Addr{netip.MustParseAddr("10.96.0.10")})
	want := []string{"127.0.0.53:53", "[fe80::1%eth0]:53"}
	if !slices.Equal(got, want) {
		t.Fatalf("Upstreams = %q, want %q", got, want)
	}
}

func TestCacheBounded(t *testing.T) {
	clock := &fakeClock{now: time.Unix(0, 0)}
	c := newMsgCache(10, clock.Now)
	for i := range 50 {
		m := new(dns.Msg)
		m.SetQuestion(fmt.Sprintf("n%d.example.", i), dns.TypeA)
		m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: m.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(192, 0, 2, 1)}}
		c.put(cacheKey{name: m.Question[0].Name, qtype: dns.TypeA, qclass: dns.ClassINET}, m)
	}
	if n := c.len(); n != 10 {
		t.Fatalf("cache holds %d entries, want 10", n)
	}
	// Not cached: SERVFAIL, truncated, TTL 0, negative without SOA.
	for _, m := range []*dns.Msg{{MsgHdr: dns.MsgHdr{Rcode: dns.RcodeServerFailure}}, {MsgHdr: dns.MsgHdr{Truncated: true}},
		{Answer: []dns.RR{&dns.A{Hdr: dns.RR_Header{Ttl: 0}}}}, {MsgHdr: dns.MsgHdr{Rcode: dns.RcodeNameError}}} {
		if ttl, ok := cacheTTL(m); ok && ttl > 0 {
			t.Errorf("cacheTTL(%v) = %d, want not cached", m.MsgHdr, ttl)
		}
	}
}

// Run with the addresses left alone serves on loopback from a resolv.conf
// naming the fake upstream (on its port: Upstreams says 53, so the test
// sets them after start through the same path the re-read takes).
func TestRunOnLoopback(t *testing.T) {
	up := startUpstream(t)
	pcs, lns := listenLoopback(t)
	port := pcs[0].LocalAddr().(*net.UDPAddr).Port
	pcs[0].Close()
	lns[0].Close()
	dir := t.TempDir()
	conf := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(conf, []byte("nameserver 127.0.0.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := informers.NewSharedInformerFactory(fake.NewClientset(testObjects()...), 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer f.Shutdown() // after cancel
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, RunConfig{Informers: f, ClusterDNS: []string{"127.0.0.1"}, Domain: "cluster.local",
			ResolvConf: conf, Port: port, KeepAddresses: true})
	}()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	testkit.Eventually(t, 5*time.Second, "the server answering", func() bool {
		m := new(dns.Msg)
		m.SetQuestion("kubernetes.default.svc.cluster.local.", dns.TypeA)
		r, _, err := (&dns.Client{Timeout: 200 * time.Millisecond}).Exchange(m, addr)
		return err == nil && len(r.Answer) == 1
	})
	// 127.0.0.1 is the server itself here: left out of the upstreams, so
	// forwarding fails rather than loops.
	if r := query(t, addr, "tcp", "www.example.org.", dns.TypeA); r.Rcode != dns.RcodeServerFailure {
		t.Errorf("forwarded to itself? rcode %s", dns.RcodeToString[r.Rcode])
	}
	_ = up
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	// The sockets are closed: the port can be bound again.
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatalf("UDP socket still open after Run: %v", err)
	}
	pc.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("TCP socket still open after Run: %v", err)
	}
	ln.Close()
}

// A source made again on the same shared factory (Run started again after
// a failure) keeps working.
func TestInformerSourceTwiceOnOneFactory(t *testing.T) {
	f := informers.NewSharedInformerFactory(fake.NewClientset(testObjects()...), 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer f.Shutdown()
	defer cancel()
	for i := range 2 {
		src, err := NewInformerSource(f)
		if err != nil {
			t.Fatalf("source %d: %v", i, err)
		}
		if !src.Start(ctx) {
			t.Fatal("informers did not sync")
		}
		if got := src.ServicesByClusterIP(netip.MustParseAddr("10.96.0.1")); len(got) != 1 {
			t.Fatalf("source %d: services at 10.96.0.1: %d, want 1", i, len(got))
		}
	}
}
