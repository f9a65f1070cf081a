package clusterdns

import (
	"sync"
	"time"

	"github.com/miekg/dns"
)

// Bounds of the forwarded answers' cache, as CoreDNS's cache plugin:
// positive answers stay at most an hour, negative ones half an hour.
const (
	maxCacheTTL    = 3600
	maxNegativeTTL = 1800
	// DefaultCacheSize is the number of answers kept.
	DefaultCacheSize = 10000
)

// cacheKey is one question, with the DNSSEC OK bit (answers differ).
type cacheKey struct {
	name          string // lower case
	qtype, qclass uint16
	do            bool
}

type cacheEntry struct {
	msg     *dns.Msg
	stored  time.Time
	expires time.Time
}

// msgCache keeps upstream answers for their TTL (the smallest of the
// answer's records; the SOA's for NXDOMAIN and NODATA). When full, an
// arbitrary entry makes room (map order), as CoreDNS's cache evicts.
type msgCache struct {
	mu      sync.Mutex
	max     int
	now     func() time.Time
	entries map[cacheKey]*cacheEntry
}

func newMsgCache(size int, now func() time.Time) *msgCache {
	return &msgCache{max: size, now: now, entries: map[cacheKey]*cacheEntry{}}
}

// get returns a copy of the cached answer with its TTLs lowered by its age.
func (c *msgCache) get(k cacheKey) (*dns.Msg, bool) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries[k]
	if ok && !now.Before(e.expires) {
		delete(c.entries, k)
		ok = false
	}
	c.mu.Unlock()
	if !ok {
		return nil, false
	}
	m := e.msg.Copy()
	age := uint32(now.Sub(e.stored) / time.Second)
	for _, section := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range section {
			h := rr.Header()
			if h.Ttl > age {
				h.Ttl -= age
			} else {
				h.Ttl = 0
			}
		}
	}
	return m, true
}

// put stores m if it may be cached: a successful answer or a negative one
// with an SOA, not truncated, with a TTL above zero.
func (c *msgCache) put(k cacheKey, m *dns.Msg) {
	ttl, ok := cacheTTL(m)
	if !ok || ttl == 0 || c.max <= 0 {
		return
	}
	now := c.now()
	e := &cacheEntry{msg: m.Copy(), stored: now, expires: now.Add(time.Duration(ttl) * time.Second)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, exists := c.entries[k]; !exists && len(c.entries) >= c.max {
		for old := range c.entries {
			delete(c.entries, old)
			break
		}
	}
	c.entries[k] = e
}

func (c *msgCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// cacheTTL is how long m may be kept.
func cacheTTL(m *dns.Msg) (uint32, bool) {
	if m.Truncated {
		return 0, false
	}
	negative := m.Rcode == dns.RcodeNameError || (m.Rcode == dns.RcodeSuccess && len(m.Answer) == 0)
	if m.Rcode != dns.RcodeSuccess && !negative {
		return 0, false
	}
	if negative {
		for _, rr := range m.Ns {
			if soa, ok := rr.(*dns.SOA); ok {
				return min(soa.Hdr.Ttl, soa.Minttl, maxNegativeTTL), true
			}
		}
		return 0, false
	}
	ttl := uint32(maxCacheTTL)
	for _, section := range [][]dns.RR{m.Answer, m.Ns} {
		for _, rr := range section {
			ttl = min(ttl, rr.Header().Ttl)
		}
	}
	return ttl, true
}
