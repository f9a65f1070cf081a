package clusterdns

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sync/singleflight"
)

// upstreamTimeout bounds one exchange with one upstream resolver.
const upstreamTimeout = 2 * time.Second

// ednsSize is the UDP payload size asked of upstreams and offered to
// clients (the DNS flag day's 1232).
const ednsSize = 1232

// forwarder sends the names outside the cluster to the node's resolvers,
// over UDP, and again over TCP when the answer comes back truncated.
type forwarder struct {
	mu        sync.RWMutex
	upstreams []string // host:port

	udp, tcp *dns.Client
	cache    *msgCache
	// flight asks the upstreams once for a question many clients ask at
	// the same moment (a cache miss under load).
	flight singleflight.Group
}

func newForwarder(upstreams []string, cache *msgCache) *forwarder {
	return &forwarder{upstreams: upstreams, cache: cache,
		udp: &dns.Client{Net: "udp", Timeout: upstreamTimeout, UDPSize: ednsSize},
		tcp: &dns.Client{Net: "tcp", Timeout: upstreamTimeout}}
}

func (f *forwarder) setUpstreams(u []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.upstreams = u
}

func (f *forwarder) servers() []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.upstreams
}

var errNoUpstream = errors.New("clusterdns: no upstream resolver (none in resolv.conf)")

// resolve answers q from the cache or the upstreams. The answer carries
// no OPT record; the caller adds its own.
func (f *forwarder) resolve(ctx context.Context, q dns.Question, do, cd bool) (*dns.Msg, error) {
	key := cacheKey{name: strings.ToLower(q.Name), qtype: q.Qtype, qclass: q.Qclass, do: do}
	if m, ok := f.cache.get(key); ok {
		return m, nil
	}
	flightKey := fmt.Sprintf("%s/%d/%d/%t/%t", key.name, key.qtype, key.qclass, do, cd)
	v, err, _ := f.flight.Do(flightKey, func() (any, error) { return f.ask(ctx, key, q, do, cd) })
	if err != nil {
		return nil, err
	}
	return v.(*dns.Msg).Copy(), nil // each caller edits its own
}

// ask gets q's answer from the first upstream that gives one and caches it.
func (f *forwarder) ask(ctx context.Context, key cacheKey, q dns.Question, do, cd bool) (*dns.Msg, error) {
	req := new(dns.Msg)
	req.Id = dns.Id()
	req.RecursionDesired = true
	req.CheckingDisabled = cd
	req.Question = []dns.Question{q}
	req.SetEdns0(ednsSize, do)
	ups := f.servers()
	if len(ups) == 0 {
		return nil, errNoUpstream
	}
	var errs []error
	for _, up := range ups {
		m, err := f.exchange(ctx, req, up)
		if err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		stripOPT(m)
		f.cache.put(key, m)
		return m, nil
	}
	return nil, fmt.Errorf("clusterdns: forward %s: %w", q.Name, errors.Join(errs...))
}

// exchange asks one upstream over UDP, then over TCP if the answer was
// truncated.
func (f *forwarder) exchange(ctx context.Context, req *dns.Msg, up string) (*dns.Msg, error) {
	m, _, err := f.udp.ExchangeContext(ctx, req, up)
	if err == nil && m.Truncated {
		m, _, err = f.tcp.ExchangeContext(ctx, req, up)
	}
	if err != nil {
		return nil, fmt.Errorf("upstream %s: %w", up, err)
	}
	if m.Id != req.Id || len(m.Question) != 1 || !strings.EqualFold(m.Question[0].Name, req.Question[0].Name) {
		return nil, fmt.Errorf("upstream %s: answer does not match the question", up)
	}
	return m, nil
}

func stripOPT(m *dns.Msg) {
	extra := m.Extra[:0]
	for _, rr := range m.Extra {
		if rr.Header().Rrtype != dns.TypeOPT {
			extra = append(extra, rr)
		}
	}
	m.Extra = extra
}

// Upstreams reads the nameservers of a resolv.conf as host:port, leaving
// out the addresses in self (the cluster DNS itself: forwarding there
// would loop).
func Upstreams(resolvConf []byte, self []netip.Addr) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(resolvConf))
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexAny(line, "#;"); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		if len(fields) < 2 || fields[0] != "nameserver" {
			continue
		}
		ip, err := netip.ParseAddr(fields[1])
		if err != nil {
			continue
		}
		skip := false
		for _, s := range self {
			skip = skip || s == ip.WithZone("")
		}
		if !skip {
			out = append(out, net.JoinHostPort(ip.String(), "53"))
		}
	}
	return out
}
