// Package clusterdns is the cluster DNS every nodelet serves on its node:
// the records of the Kubernetes DNS specification for the cluster domain,
// made from Services, EndpointSlices and Pods (records.go, source.go), and
// every other name forwarded to the node's own resolvers with a cache
// (forward.go, cache.go). run.go puts the cluster DNS IPs on a local
// interface (iface_linux.go) and serves them on port 53, UDP and TCP.
package clusterdns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// DefaultTTL is the TTL of the cluster's records (CoreDNS's kubernetes
// plugin's default "ttl 5").
const DefaultTTL = 5

// queryTimeout bounds the work for one query (forwarding included).
const queryTimeout = 5 * time.Second

// Config configures a Server.
type Config struct {
	// Domain is the cluster domain, e.g. "cluster.local".
	Domain string
	// Source gives the Services, EndpointSlices and pod IPs.
	Source Source
	// Upstreams are the resolvers of other names (host:port).
	Upstreams []string
	TTL       uint32 // DefaultTTL when 0
	CacheSize int    // DefaultCacheSize when 0; < 0 disables the cache
	Now       func() time.Time
	Log       *slog.Logger
}

// Server answers DNS queries; it is a dns.Handler.
type Server struct {
	zone  zone
	fwd   *forwarder
	cache *msgCache
	log   *slog.Logger
	// base is Serve's context: queries in flight end with it.
	base atomic.Pointer[context.Context]
	// lastWarn (unix nanoseconds) keeps failed forwards to one warning
	// per forwardWarnEvery.
	lastWarn atomic.Int64
}

// forwardWarnEvery spaces the warnings about upstreams that fail.
const forwardWarnEvery = 30 * time.Second

// New makes a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Domain == "" || cfg.Source == nil {
		return nil, errors.New("clusterdns: Domain and Source are required")
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.CacheSize == 0 {
		cfg.CacheSize = DefaultCacheSize
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	c := newMsgCache(cfg.CacheSize, cfg.Now)
	return &Server{
		zone:  zone{origin: dns.CanonicalName(cfg.Domain), ttl: cfg.TTL, src: cfg.Source},
		fwd:   newForwarder(cfg.Upstreams, c),
		cache: c,
		log:   cfg.Log,
	}, nil
}

// SetUpstreams replaces the resolvers of other names.
func (s *Server) SetUpstreams(u []string) { s.fwd.setUpstreams(u) }

// ServeDNS answers one query; over UDP an answer too large for the
// client is truncated (TC set), so the client asks again over TCP.
func (s *Server) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	base := context.Background() // ServeDNS called outside Serve
	if p := s.base.Load(); p != nil {
		base = *p
	}
	ctx, cancel := context.WithTimeout(base, queryTimeout)
	defer cancel()
	m := s.answer(ctx, req)
	if _, udp := w.LocalAddr().(*net.UDPAddr); udp {
		size := dns.MinMsgSize
		if opt := req.IsEdns0(); opt != nil {
			size = max(int(opt.UDPSize()), dns.MinMsgSize)
		}
		m.Truncate(size) // compresses only when it must
	} else {
		m.Compress = true // a large headless answer stays under 64 KiB longer
	}
	if err := w.WriteMsg(m); err != nil {
		s.log.Debug("write DNS answer", "err", err)
	}
}

// answer builds the reply to req.
func (s *Server) answer(ctx context.Context, req *dns.Msg) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(req)
	m.RecursionAvailable = true
	opt := req.IsEdns0()
	defer func() {
		if opt != nil {
			m.SetEdns0(ednsSize, opt.Do())
		}
	}()
	if req.Opcode != dns.OpcodeQuery {
		m.Rcode = dns.RcodeNotImplemented
		return m
	}
	if len(req.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		return m
	}
	q := req.Question[0]
	name := strings.ToLower(q.Name)
	if (q.Qclass == dns.ClassINET || q.Qclass == dns.ClassANY) && s.zone.inZone(name) {
		s.local(ctx, m, q, name)
		return m
	}
	if q.Qtype == dns.TypePTR {
		if ip, ok := reverseIP(name); ok {
			if rrs := s.zone.reverse(q.Name, ip); len(rrs) > 0 {
				m.Authoritative = true
				m.Answer = rrs
				return m
			}
		}
	}
	do := opt != nil && opt.Do()
	up, err := s.fwd.resolve(ctx, q, do, req.CheckingDisabled)
	if err != nil {
		s.warnForward(q, err)
		m.Rcode = dns.RcodeServerFailure
		return m
	}
	m.Rcode = up.Rcode
	m.Authoritative = up.Authoritative
	m.AuthenticatedData = up.AuthenticatedData
	m.Answer, m.Ns, m.Extra = up.Answer, up.Ns, up.Extra
	return m
}

// warnForward logs a failed forward: a warning now and then, else at
// debug level.
func (s *Server) warnForward(q dns.Question, err error) {
	now, last := time.Now().UnixNano(), s.lastWarn.Load()
	if now-last >= int64(forwardWarnEvery) && s.lastWarn.CompareAndSwap(last, now) {
		s.log.Warn("cluster DNS: forwarding failed (further failures for 30s at debug level)", "name", q.Name, "type", dns.TypeToString[q.Qtype], "err", err)
		return
	}
	s.log.Debug("cluster DNS: forwarding failed", "name", q.Name, "type", dns.TypeToString[q.Qtype], "err", err)
}

// local answers a name of the cluster zone.
func (s *Server) local(ctx context.Context, m *dns.Msg, q dns.Question, name string) {
	m.Authoritative = true
	res := s.zone.lookup(q.Name, name)
	if !res.exists {
		m.Rcode = dns.RcodeNameError
		m.Ns = []dns.RR{s.zone.soa(s.zone.origin)}
		return
	}
	if cname := firstCNAME(res.rrs); cname != nil && q.Qtype != dns.TypeCNAME {
		m.Answer = []dns.RR{cname}
		m.Answer = append(m.Answer, s.chase(ctx, cname.Target, q.Qtype)...)
		return
	}
	m.Answer = ofType(res.rrs, q.Qtype)
	if q.Qtype == dns.TypeSRV || q.Qtype == dns.TypeANY {
		m.Extra = res.extra
	}
	if len(m.Answer) == 0 {
		m.Ns = []dns.RR{s.zone.soa(s.zone.origin)}
	}
}

// chase resolves an ExternalName's target for address queries, in the
// zone or through the upstreams, so stub resolvers get the addresses too.
func (s *Server) chase(ctx context.Context, target string, qtype uint16) []dns.RR {
	if qtype != dns.TypeA && qtype != dns.TypeAAAA {
		return nil
	}
	t := strings.ToLower(target)
	if s.zone.inZone(t) {
		res := s.zone.lookup(target, t)
		return ofType(res.rrs, qtype)
	}
	up, err := s.fwd.resolve(ctx, dns.Question{Name: target, Qtype: qtype, Qclass: dns.ClassINET}, false, false)
	if err != nil || up.Rcode != dns.RcodeSuccess {
		return nil
	}
	return up.Answer
}

func firstCNAME(rrs []dns.RR) *dns.CNAME {
	for _, rr := range rrs {
		if c, ok := rr.(*dns.CNAME); ok {
			return c
		}
	}
	return nil
}

func ofType(rrs []dns.RR, qtype uint16) []dns.RR {
	if qtype == dns.TypeANY {
		return rrs
	}
	var out []dns.RR
	for _, rr := range rrs {
		if rr.Header().Rrtype == qtype {
			out = append(out, rr)
		}
	}
	return out
}

// Serve answers on the given sockets until ctx ends, then closes them
// and waits for the servers to stop.
func (s *Server) Serve(ctx context.Context, pcs []net.PacketConn, lns []net.Listener) error {
	s.base.Store(&ctx)
	var servers []*dns.Server
	for _, pc := range pcs {
		servers = append(servers, &dns.Server{PacketConn: pc, Handler: s})
	}
	for _, ln := range lns {
		servers = append(servers, &dns.Server{Listener: ln, Handler: s, ReadTimeout: 10 * time.Second})
	}
	errs := make(chan error, len(servers))
	var wg sync.WaitGroup
	for _, srv := range servers {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		wg.Go(func() { errs <- srv.ActivateAndServe() })
		select { // Shutdown refuses a server that has not started
		case <-started:
		case err := <-errs:
			errs <- err
		}
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errs:
		err = fmt.Errorf("clusterdns: serve: %w", err)
	}
	for _, srv := range servers {
		srv.Shutdown()
	}
	wg.Wait()
	return err
}

// Listen opens UDP and TCP sockets on each address (host:port).
func Listen(addrs []string) ([]net.PacketConn, []net.Listener, error) {
	var pcs []net.PacketConn
	var lns []net.Listener
	closeAll := func() {
		for _, pc := range pcs {
			pc.Close()
		}
		for _, ln := range lns {
			ln.Close()
		}
	}
	for _, a := range addrs {
		pc, err := net.ListenPacket("udp", a)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("clusterdns: listen: %w", err)
		}
		pcs = append(pcs, pc)
		ln, err := net.Listen("tcp", a)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("clusterdns: listen: %w", err)
		}
		lns = append(lns, ln)
	}
	return pcs, lns, nil
}
