package testregistry

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Proxy forwards to a registry and records the requests it forwards.
type Proxy struct {
	Host string // 127.0.0.1:port

	delay    time.Duration
	mu       sync.Mutex
	requests []string       // "HEAD /v2/library/busybox/manifests/1.36"
	inFlight map[string]int // requests in flight by repository
	maxRepos int            // most repositories with requests in flight at once
}

// ProxyOptions configure a Proxy.
type ProxyOptions struct {
	TLS   bool          // serve HTTPS with httptest's self-signed certificate
	Delay time.Duration // before each response, so that concurrent pulls overlap
	// TokenUser and TokenPassword, when set, put the registry behind
	// bearer token auth: the proxy's /token endpoint gives a token for
	// these credentials (basic auth on GET, as docker's token servers do).
	TokenUser, TokenPassword string
}

// StartProxy serves a recording reverse proxy on loopback to the
// registry at target (host:port, plain HTTP) until the test ends. The
// server is returned for its TLS certificate and client.
func StartProxy(t testing.TB, target string, opts ProxyOptions) (*Proxy, *httptest.Server) {
	t.Helper()
	p := &Proxy{delay: opts.Delay, inFlight: map[string]int{}}
	var h http.Handler = httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: target})
	if opts.TokenUser != "" {
		h = tokenAuth(opts.TokenUser, opts.TokenPassword, h)
	}
	record := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		repo := p.begin(r)
		defer p.end(repo)
		time.Sleep(p.delay)
		h.ServeHTTP(w, r)
	})
	var srv *httptest.Server
	if opts.TLS {
		srv = httptest.NewTLSServer(record)
	} else {
		srv = httptest.NewServer(record)
	}
	t.Cleanup(srv.Close)
	p.Host = strings.TrimPrefix(strings.TrimPrefix(srv.URL, "https://"), "http://")
	return p, srv
}

// Token is the bearer token the proxy's /token endpoint hands out.
const Token = "nodelet-test-token"

// tokenAuth asks for a bearer token on the registry API and serves /token,
// which gives one for user and password.
func tokenAuth(user, password string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" {
			if u, pw, ok := r.BasicAuth(); r.Method != http.MethodGet || !ok || u != user || pw != password {
				http.Error(w, `{"errors":[{"code":"UNAUTHORIZED"}]}`, http.StatusUnauthorized)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"token": Token, "expires_in": 300})
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+Token {
			scope := ""
			if repo := repository(r.URL.Path); repo != "" {
				scope = fmt.Sprintf(",scope=%q", "repository:"+repo+":pull")
			}
			scheme := "http"
			if r.TLS != nil {
				scheme = "https"
			}
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="%s://%s/token",service="test"%s`, scheme, r.Host, scope))
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED"}]}`, http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (p *Proxy) begin(r *http.Request) string {
	repo := repository(r.URL.Path)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests = append(p.requests, r.Method+" "+r.URL.Path)
	if repo != "" {
		p.inFlight[repo]++
		p.maxRepos = max(p.maxRepos, len(p.inFlight))
	}
	return repo
}

func (p *Proxy) end(repo string) {
	if repo == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inFlight[repo]--; p.inFlight[repo] == 0 {
		delete(p.inFlight, repo)
	}
}

// Count returns how many requests contained every one of parts
// ("HEAD", "/manifests/1.36"); with no parts, how many there were.
func (p *Proxy) Count(parts ...string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
outer:
	for _, r := range p.requests {
		for _, part := range parts {
			if !strings.Contains(r, part) {
				continue outer
			}
		}
		n++
	}
	return n
}

// List returns the requests recorded so far, as "METHOD /path".
func (p *Proxy) List() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.requests)
}

// MaxRepos returns the most repositories that had requests in flight at
// once since the last Reset.
func (p *Proxy) MaxRepos() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.maxRepos
}

// Reset forgets the requests recorded so far and MaxRepos.
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests, p.maxRepos = nil, 0
}

// repository is the repository of a registry API path
// (/v2/library/busybox/manifests/1.36: library/busybox).
func repository(path string) string {
	rest, ok := strings.CutPrefix(path, "/v2/")
	if !ok {
		return ""
	}
	for _, sep := range []string{"/manifests/", "/blobs/", "/tags/"} {
		if i := strings.LastIndex(rest, sep); i > 0 {
			return rest[:i]
		}
	}
	return ""
}
