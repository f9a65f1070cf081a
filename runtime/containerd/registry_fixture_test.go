package containerd_test

// Fixtures of the pull tests: Debian's docker-registry on loopback (with
// htpasswd auth or without), a recording reverse proxy in front of it, and
// the busybox test image pushed there with containerd's own pusher.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images/archive"
	"github.com/containerd/containerd/v2/core/remotes"
	"github.com/containerd/containerd/v2/core/remotes/docker"
	"github.com/containerd/containerd/v2/core/remotes/docker/config"
	"github.com/containerd/containerd/v2/plugins/content/local"
	"github.com/containerd/platforms"
	digest "github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/nodelet/nodelet/hosttools"
	"github.com/nodelet/nodelet/test/images"
)

// registryConfig is the docker-registry (distribution 2.8) configuration;
// the auth section is appended when the registry has a user.
const registryConfig = `version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
  secret: nodelet-test
`

const registryAuth = `auth:
  htpasswd:
    realm: nodelet-test
    path: %s
`

// testRegistry is a docker-registry serving on 127.0.0.1.
type testRegistry struct {
	Host           string // 127.0.0.1:port
	User, Password string // empty: no auth
}

// startRegistry runs docker-registry on a free loopback port with its
// storage in a temporary directory, requiring basic auth as user when user
// is not empty. It is stopped at cleanup. The test fails when the registry
// is not installed (apt-get install docker-registry apache2-utils).
func startRegistry(t *testing.T, user, password string) *testRegistry {
	t.Helper()
	bin, err := hosttools.Path("docker-registry")
	if err != nil {
		t.Fatalf("docker-registry is not installed (apt-get install docker-registry apache2-utils): %v", err)
	}
	dir := t.TempDir()
	auth := ""
	if user != "" {
		out, err := hosttools.Command("htpasswd", "-Bbn", user, password).Output()
		if err != nil {
			t.Fatalf("htpasswd (apt-get install apache2-utils): %v", err)
		}
		htpasswd := filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(htpasswd, bytes.TrimSpace(out), 0o600); err != nil {
			t.Fatal(err)
		}
		auth = fmt.Sprintf(registryAuth, htpasswd)
	}
	// The free port may be taken before the registry binds it: retry.
	for attempt := 1; ; attempt++ {
		host := freeLoopbackAddr(t)
		conf := fmt.Sprintf(registryConfig, filepath.Join(dir, "storage"), host) + auth
		err := runRegistry(t, bin, filepath.Join(dir, fmt.Sprint(attempt)), host, conf)
		if err == nil {
			return &testRegistry{Host: host, User: user, Password: password}
		}
		if attempt == 3 {
			t.Fatal(err)
		}
		t.Logf("%v; retrying on another port", err)
	}
}

// runRegistry starts docker-registry with conf (its files in dir) and
// waits until it answers on host; the registry is stopped at cleanup.
func runRegistry(t *testing.T, bin, dir, host, conf string) error {
	t.Helper()
	cfgPath, logPath := filepath.Join(dir, "config.yml"), filepath.Join(dir, "registry.log")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", cfgPath)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("start docker-registry: %v", err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); logFile.Close(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			if data, err := os.ReadFile(logPath); err == nil {
				t.Logf("docker-registry log:\n%s", data)
			}
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	client := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-exited:
			data, _ := os.ReadFile(logPath)
			return fmt.Errorf("docker-registry on %s exited at start: %v\n%s", host, waitErr, data)
		default:
		}
		if resp, err := client.Get("http://" + host + "/v2/"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized {
				return nil
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("docker-registry on %s did not answer within 20s", host)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freeLoopbackAddr returns 127.0.0.1:<a port free a moment ago>.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// blockDNS makes every DNS query of this process fail for the test: a pull
// that went to a registry by name instead of the configured loopback hosts
// fails rather than asking the host's resolver, which is off-machine.
func blockDNS(t *testing.T) {
	old := net.DefaultResolver
	net.DefaultResolver = &net.Resolver{PreferGo: true, Dial: func(_ context.Context, _, addr string) (net.Conn, error) {
		return nil, fmt.Errorf("test: DNS query to %s blocked", addr)
	}}
	t.Cleanup(func() { net.DefaultResolver = old })
}

// registryProxy forwards to a registry and records the requests; each
// response waits for delay first, so that concurrent pulls overlap.
type registryProxy struct {
	Host  string
	delay time.Duration

	mu       sync.Mutex
	requests []string       // "HEAD /v2/library/busybox/manifests/1.36"
	inFlight map[string]int // requests in flight by repository
	maxRepos int            // most repositories with requests in flight at once
}

// proxyOptions configure a registryProxy.
type proxyOptions struct {
	tls   bool          // serve HTTPS with httptest's self-signed certificate
	delay time.Duration // before each response
	// tokenUser and tokenPassword, when set, put the registry behind
	// bearer token auth: the proxy's /token endpoint gives a token for
	// these credentials (basic auth on GET, as docker's token servers do).
	tokenUser, tokenPassword string
}

// startProxy serves a recording reverse proxy on loopback to the
// registry at target.
func startProxy(t *testing.T, target string, opts proxyOptions) (*registryProxy, *httptest.Server) {
	t.Helper()
	p := &registryProxy{delay: opts.delay, inFlight: map[string]int{}}
	var h http.Handler = httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: target})
	if opts.tokenUser != "" {
		h = tokenAuth(opts.tokenUser, opts.tokenPassword, h)
	}
	record := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		repo := p.begin(r)
		defer p.end(repo)
		time.Sleep(p.delay)
		h.ServeHTTP(w, r)
	})
	var srv *httptest.Server
	if opts.tls {
		srv = httptest.NewTLSServer(record)
	} else {
		srv = httptest.NewServer(record)
	}
	t.Cleanup(srv.Close)
	p.Host = strings.TrimPrefix(strings.TrimPrefix(srv.URL, "https://"), "http://")
	return p, srv
}

// testToken is the bearer token tokenAuth hands out.
const testToken = "nodelet-test-token"

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
			json.NewEncoder(w).Encode(map[string]any{"token": testToken, "expires_in": 300})
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+testToken {
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
func (p *registryProxy) begin(r *http.Request) string {
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

func (p *registryProxy) end(repo string) {
	if repo == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inFlight[repo]--; p.inFlight[repo] == 0 {
		delete(p.inFlight, repo)
	}
}

// count returns how many requests contained every one of parts.
func (p *registryProxy) count(parts ...string) int {
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

// list returns the requests recorded so far.
func (p *registryProxy) list() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.requests)
}

// reset forgets the requests recorded so far.
func (p *registryProxy) reset() {
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

// imageSource holds the busybox test image in a content store of its own
// (not the containerd under test) and pushes it to registries.
type imageSource struct {
	store    content.Store
	manifest ocispec.Descriptor
}

func newImageSource(t *testing.T) *imageSource {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	tarPath, _, err := images.Busybox(dir)
	if err != nil {
		t.Fatal(err)
	}
	store, err := local.NewStore(filepath.Join(dir, "content"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(tarPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	indexDesc, err := archive.ImportIndex(ctx, store, f)
	if err != nil {
		t.Fatalf("import busybox archive: %v", err)
	}
	var index ocispec.Index
	readJSON(t, store, indexDesc, &index)
	if len(index.Manifests) == 0 {
		t.Fatal("busybox archive has no manifest")
	}
	m := index.Manifests[0]
	return &imageSource{store: store, manifest: ocispec.Descriptor{MediaType: m.MediaType, Digest: m.Digest, Size: m.Size}}
}

// push pushes busybox to reg as repoTag (library/busybox:1.36) with
// containerd's pusher and the registry's credentials. Extra environment
// variables make another image (its own config and manifest, the same
// layer). It returns the manifest's digest.
func (s *imageSource) push(t *testing.T, reg *testRegistry, repoTag string, env ...string) digest.Digest {
	t.Helper()
	ctx := context.Background()
	desc := s.manifest
	if len(env) > 0 {
		desc = s.variant(t, env)
	}
	opts := config.HostOptions{DefaultScheme: "http"}
	if reg.User != "" {
		opts.Credentials = func(string) (string, string, error) { return reg.User, reg.Password, nil }
	}
	resolver := docker.NewResolver(docker.ResolverOptions{Hosts: config.ConfigureHosts(ctx, opts)})
	ref := reg.Host + "/" + repoTag
	pusher, err := resolver.Pusher(ctx, ref)
	if err != nil {
		t.Fatalf("pusher for %s: %v", ref, err)
	}
	if err := remotes.PushContent(ctx, pusher, desc, s.store, nil, platforms.All, nil); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	return desc.Digest
}

// variant writes a manifest whose config has env added.
func (s *imageSource) variant(t *testing.T, env []string) ocispec.Descriptor {
	t.Helper()
	var m ocispec.Manifest
	readJSON(t, s.store, s.manifest, &m)
	var img ocispec.Image
	readJSON(t, s.store, m.Config, &img)
	img.Config.Env = append(img.Config.Env, env...)
	m.Config = s.writeJSON(t, m.Config.MediaType, img)
	return s.writeJSON(t, s.manifest.MediaType, m)
}

func (s *imageSource) writeJSON(t *testing.T, mediaType string, v any) ocispec.Descriptor {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	desc := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(data), Size: int64(len(data))}
	if err := content.WriteBlob(context.Background(), s.store, desc.Digest.String(), bytes.NewReader(data), desc); err != nil {
		t.Fatalf("write %s: %v", mediaType, err)
	}
	return desc
}

func readJSON(t *testing.T, store content.Provider, desc ocispec.Descriptor, v any) {
	t.Helper()
	data, err := content.ReadBlob(context.Background(), store, desc)
	if err != nil {
		t.Fatalf("read %s: %v", desc.Digest, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("parse %s: %v", desc.Digest, err)
	}
}
