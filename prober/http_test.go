package prober

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func testHandlers() *handlers {
	dial := defaultDial()
	return &handlers{
		dial:      dial,
		transport: newHTTPTransport(dial),
		userAgent: DefaultUserAgent,
		log:       slog.New(slog.DiscardHandler),
	}
}

// hostPort splits a test server's URL.
func hostPort(t *testing.T, rawURL string) (string, int) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	return u.Hostname(), port
}

func TestNewHTTPRequest(t *testing.T) {
	c := &corev1.Container{Name: "app", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}
	tests := []struct {
		name      string
		action    corev1.HTTPGetAction
		wantURL   string
		wantHost  string
		wantHdr   map[string]string // "" value: header absent
		wantError string
	}{{
		name:    "defaults",
		action:  corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(80)},
		wantURL: "http://10.0.0.5:80/healthz",
		wantHdr: map[string]string{"User-Agent": "kube-probe/1.37", "Accept": "*/*", "Accept-Encoding": ""},
	}, {
		name:    "named port, https, host and query",
		action:  corev1.HTTPGetAction{Scheme: corev1.URISchemeHTTPS, Host: "127.0.0.1", Path: "/ready?full=1", Port: intstr.FromString("http")},
		wantURL: "https://127.0.0.1:8080/ready?full=1",
	}, {
		name:    "number as string",
		action:  corev1.HTTPGetAction{Port: intstr.FromString("9090")},
		wantURL: "http://10.0.0.5:9090",
	}, {
		name:    "ipv6 pod ip",
		action:  corev1.HTTPGetAction{Host: "fd00::1", Path: "/", Port: intstr.FromInt32(80)},
		wantURL: "http://[fd00::1]:80/",
	}, {
		name: "headers override",
		action: corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(80), HTTPHeaders: []corev1.HTTPHeader{
			{Name: "user-agent", Value: "mine"}, {Name: "Accept", Value: ""}, {Name: "Host", Value: "example.com"},
			{Name: "X-Custom", Value: "a"}, {Name: "X-Custom", Value: "b"},
		}},
		wantURL:  "http://10.0.0.5:80/",
		wantHost: "example.com",
		wantHdr:  map[string]string{"User-Agent": "mine", "Accept": "", "X-Custom": "a"},
	}, {
		name:      "unknown named port",
		action:    corev1.HTTPGetAction{Port: intstr.FromString("grpc")},
		wantError: `port "grpc" is not a port of container "app"`,
	}, {
		name:      "port out of range",
		action:    corev1.HTTPGetAction{Port: intstr.FromInt32(70000)},
		wantError: "invalid port number: 70000",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := newHTTPRequest(context.Background(), &tt.action, c, "10.0.0.5", DefaultUserAgent)
			if tt.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantError) {
					t.Fatalf("err = %v, want %q", err, tt.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := req.URL.String(); got != tt.wantURL {
				t.Errorf("url = %q, want %q", got, tt.wantURL)
			}
			if req.Host != tt.wantHost {
				t.Errorf("host = %q, want %q", req.Host, tt.wantHost)
			}
			for k, v := range tt.wantHdr {
				if got := req.Header.Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

// newProbedServers serves the paths TestHTTPProbe probes, over HTTP and
// HTTPS (with a certificate nobody trusts).
func newProbedServers(t *testing.T) (srv, tlsSrv *httptest.Server) {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("fine")) })
	mux.HandleFunc("/fail", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte("secret body"))
	})
	mux.HandleFunc("/notfound", http.NotFound)
	mux.HandleFunc("/local-redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ok", http.StatusFound)
	})
	mux.HandleFunc("/remote-redirect", func(w http.ResponseWriter, r *http.Request) {
		// Not followed: no traffic leaves 127.0.0.1.
		http.Redirect(w, r, "http://example.invalid/ok", http.StatusFound)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(strings.Repeat("x", 3*maxOutputLength)))
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	srv, tlsSrv = httptest.NewServer(mux), httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(tlsSrv.Close)
	return srv, tlsSrv
}

func TestHTTPProbe(t *testing.T) {
	srv, tlsSrv := newProbedServers(t)
	host, port := hostPort(t, srv.URL)
	_, tlsPort := hostPort(t, tlsSrv.URL)
	closed := closedPort(t)
	tests := []struct {
		name       string
		scheme     corev1.URIScheme
		port       int
		path       string
		timeout    time.Duration
		want       Result
		wantOutput string // substring
		wantLen    int
	}{
		{name: "ok", path: "/ok", want: Success, wantOutput: "fine"},
		{name: "500", path: "/fail", want: Failure, wantOutput: "HTTP probe failed with statuscode: 500"},
		{name: "404", path: "/notfound", want: Failure, wantOutput: "HTTP probe failed with statuscode: 404"},
		{name: "same-host redirect followed", path: "/local-redirect", want: Success, wantOutput: "fine"},
		{name: "other-host redirect not followed", path: "/remote-redirect", want: Warning, wantOutput: "Probe terminated redirects, Response body: "},
		{name: "redirect loop", path: "/loop", want: Failure, wantOutput: "stopped after 10 redirects"},
		{name: "body limited", path: "/big", want: Success, wantLen: maxOutputLength},
		{name: "timeout", path: "/slow", timeout: 100 * time.Millisecond, want: Failure, wantOutput: "Client.Timeout exceeded"},
		{name: "https without verification", scheme: corev1.URISchemeHTTPS, port: tlsPort, path: "/ok", want: Success, wantOutput: "fine"},
		{name: "refused", port: closed, path: "/ok", want: Failure, wantOutput: "connect: connection refused"},
	}
	h := testHandlers()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := port
			if tt.port != 0 {
				p = tt.port
			}
			timeout := tt.timeout
			if timeout == 0 {
				timeout = 5 * time.Second
			}
			a := &corev1.HTTPGetAction{Scheme: tt.scheme, Path: tt.path, Port: intstr.FromInt(p)}
			req, err := newHTTPRequest(context.Background(), a, &corev1.Container{}, host, DefaultUserAgent)
			if err != nil {
				t.Fatal(err)
			}
			got, out, err := h.httpProbe(req, timeout)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want || !strings.Contains(out, tt.wantOutput) {
				t.Errorf("got %v %q, want %v containing %q", got, out, tt.want, tt.wantOutput)
			}
			if strings.Contains(out, "secret body") {
				t.Errorf("failure output %q contains the body", out)
			}
			if tt.wantLen != 0 && len(out) != tt.wantLen {
				t.Errorf("output length %d, want %d", len(out), tt.wantLen)
			}
		})
	}
}

// TestHTTPProbeHeaders checks what the container sees of a probe.
func TestHTTPProbeHeaders(t *testing.T) {
	got := make(chan *http.Request, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r
	}))
	defer srv.Close()
	host, port := hostPort(t, srv.URL)
	c := &corev1.Container{Ports: []corev1.ContainerPort{{Name: "web", ContainerPort: int32(port)}}}
	a := &corev1.HTTPGetAction{Path: "/h", Port: intstr.FromString("web"), HTTPHeaders: []corev1.HTTPHeader{
		{Name: "Host", Value: "svc.example"}, {Name: "X-Token", Value: "t"},
	}}
	req, err := newHTTPRequest(context.Background(), a, c, host, DefaultUserAgent)
	if err != nil {
		t.Fatal(err)
	}
	if r, _, err := testHandlers().httpProbe(req, 5*time.Second); err != nil || r != Success {
		t.Fatalf("probe = %v, %v", r, err)
	}
	r := <-got
	for k, want := range map[string]string{
		"User-Agent": "kube-probe/1.37", "Accept": "*/*", "X-Token": "t", "Accept-Encoding": "", "Connection": "close",
	} {
		if v := r.Header.Get(k); v != want {
			t.Errorf("%s = %q, want %q", k, v, want)
		}
	}
	if r.Host != "svc.example" {
		t.Errorf("Host = %q, want svc.example", r.Host)
	}
	if r.URL.Path != "/h" {
		t.Errorf("path = %q", r.URL.Path)
	}
}

// closedPort returns a port of 127.0.0.1 that nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return port
}

// newRedirectServer serves a redirect to another host on 127.0.0.1 and
// returns its port.
func newRedirectServer(t *testing.T) int {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://example.invalid/", http.StatusMovedPermanently)
	}))
	t.Cleanup(srv.Close)
	_, port := hostPort(t, srv.URL)
	return port
}
