package nodeapi

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/runtime"
)

// testCA issues the certificates of a test: the node's serving
// certificate and callers' client certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue signs a certificate for subject: a serving certificate for
// 127.0.0.1 when server is true, else a client certificate.
func (ca *testCA) issue(t *testing.T, subject pkix.Name, server bool) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		tmpl.DNSNames = []string{"localhost"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// fakeRuntime is the Runtime seam: pod states set by the test, and Exec
// and PortForward doing what the test says.
type fakeRuntime struct {
	mu       sync.Mutex
	statuses map[types.UID]*runtime.PodStatus
	execs    []execCall
	exec     func(cmd []string, stdin io.Reader, stdout, stderr io.Writer) error
	forward  func(port int32, stream io.ReadWriteCloser) error
}

type execCall struct {
	id  string
	cmd []string
	tty bool
}

func newFakeRuntime() *fakeRuntime {
	return &fakeRuntime{statuses: map[types.UID]*runtime.PodStatus{}}
}

func (f *fakeRuntime) set(st *runtime.PodStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.statuses[st.UID] = st
}

// setState changes the state of the container instance id.
func (f *fakeRuntime) setState(uid types.UID, id string, state runtime.State) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.statuses[uid].Containers {
		if f.statuses[uid].Containers[i].ID == id {
			f.statuses[uid].Containers[i].State = state
		}
	}
}

func (f *fakeRuntime) PodStatus(_ context.Context, uid types.UID) (*runtime.PodStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.statuses[uid]
	if !ok {
		return &runtime.PodStatus{UID: uid}, nil
	}
	out := *st
	out.Sandboxes = slices.Clone(st.Sandboxes)
	out.Containers = slices.Clone(st.Containers)
	return &out, nil
}

func (f *fakeRuntime) Exec(_ context.Context, id string, cmd []string, stdin io.Reader, stdout, stderr io.WriteCloser, tty bool, _ <-chan runtime.TerminalSize) error {
	f.mu.Lock()
	f.execs = append(f.execs, execCall{id: id, cmd: cmd, tty: tty})
	exec := f.exec
	f.mu.Unlock()
	if exec == nil {
		return errors.New("fake: no exec")
	}
	var out, errOut io.Writer = io.Discard, io.Discard
	if stdout != nil {
		out = stdout
	}
	if stderr != nil {
		errOut = stderr
	}
	return exec(cmd, stdin, out, errOut)
}

// ExecSync behaves as the runtime's: Exec into one buffer, a non-zero
// exit is a result.
func (f *fakeRuntime) ExecSync(ctx context.Context, id string, cmd []string) ([]byte, int, error) {
	var buf bytes.Buffer
	w := nopWriteCloser{&buf}
	err := f.Exec(ctx, id, cmd, nil, w, w, false, nil)
	var exit *runtime.ExitError
	if errors.As(err, &exit) {
		return buf.Bytes(), exit.Code, nil
	}
	return buf.Bytes(), 0, err
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func (f *fakeRuntime) PortForward(_ context.Context, _ types.UID, port int32, stream io.ReadWriteCloser) error {
	f.mu.Lock()
	forward := f.forward
	f.mu.Unlock()
	if forward == nil {
		return errors.New("fake: no port forwarding")
	}
	return forward(port, stream)
}

// Attach is not under test here (the attach code is being rewritten).
func (f *fakeRuntime) Attach(context.Context, string, io.Reader, io.Writer, io.Writer, <-chan runtime.TerminalSize) error {
	return runtime.ErrNotAttachable
}

func (f *fakeRuntime) execCalls() []execCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.execs)
}

// fakePods is the Pods seam.
type fakePods struct {
	mu   sync.Mutex
	pods []*corev1.Pod
}

func (p *fakePods) list() []*corev1.Pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.pods)
}

func (p *fakePods) add(pod *corev1.Pod) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pods = append(p.pods, pod)
}

type fakeStats struct{}

func (fakeStats) Summary() *statsv1alpha1.Summary {
	return &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{NodeName: "node-1"}}
}

func (fakeStats) ResourceMetricsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "node_cpu_usage_seconds_total 1\n")
	})
}

// testNode is a Server on a real TLS listener with its callers.
type testNode struct {
	rt      *fakeRuntime
	pods    *fakePods
	logRoot string
	url     string
	ca      *testCA
	// Clients by identity: "apiserver" (the allowed user), "admin" (a
	// member of system:masters), "user" (neither), "anonymous" (no
	// certificate), "stranger" (a certificate of another CA).
	clients map[string]*http.Client
	// certs are the client certificates by identity.
	certs map[string]tls.Certificate
}

func newTestNode(t *testing.T, mutate func(*Config)) *testNode {
	t.Helper()
	ca := newTestCA(t, "cluster-ca")
	n := &testNode{rt: newFakeRuntime(), pods: &fakePods{}, logRoot: t.TempDir(), ca: ca}
	cfg := Config{
		Certificate: ca.issue(t, pkix.Name{CommonName: "node-1"}, true),
		ClientCAs:   ca.pool,
		Pods:        n.pods.list,
		Runtime:     n.rt,
		Stats:       fakeStats{},
		LogRoot:     n.logRoot,
		Log:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if mutate != nil {
		mutate(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(s.Handler())
	ts.TLS = s.TLSConfig()
	ts.StartTLS()
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	n.url = ts.URL
	other := newTestCA(t, "other-ca")
	n.certs = map[string]tls.Certificate{
		"apiserver": ca.issue(t, pkix.Name{CommonName: APIServerUser}, false),
		"admin":     ca.issue(t, pkix.Name{CommonName: "admin", Organization: []string{"team", "system:masters"}}, false),
		"user":      ca.issue(t, pkix.Name{CommonName: "jane", Organization: []string{"developers"}}, false),
		"stranger":  other.issue(t, pkix.Name{CommonName: APIServerUser, Organization: []string{"system:masters"}}, false),
	}
	n.clients = map[string]*http.Client{"anonymous": n.client(nil)}
	for name, cert := range n.certs {
		n.clients[name] = n.client(&cert)
	}
	return n
}

func (n *testNode) tlsConfig(cert *tls.Certificate) *tls.Config {
	cfg := &tls.Config{RootCAs: n.ca.pool, MinVersion: tls.VersionTLS12}
	if cert != nil {
		// Always present it: Go's client would otherwise leave out a
		// certificate the server's CA list does not name.
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	return cfg
}

func (n *testNode) client(cert *tls.Certificate) *http.Client {
	tr := &http.Transport{TLSClientConfig: n.tlsConfig(cert)}
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}
}

// do sends one request as the API server and returns its status and body.
func (n *testNode) do(t *testing.T, method, path string) (int, string) {
	t.Helper()
	return n.doAs(t, "apiserver", method, path)
}

func (n *testNode) doAs(t *testing.T, who, method, path string) (int, string) {
	t.Helper()
	return n.doHeader(t, who, method, path, nil)
}

func (n *testNode) doHeader(t *testing.T, who, method, path string, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, n.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := n.clients[who].Do(req)
	if err != nil {
		t.Fatalf("%s %s as %s: %v", method, path, who, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp.StatusCode, string(body)
}

// status decodes a metav1.Status answer.
func status(t *testing.T, body string) metav1.Status {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil || st.Kind != "Status" {
		t.Fatalf("not a Status (%v): %q", err, body)
	}
	return st
}

// webPod is a running pod with one container "app" (instance "c-app").
func webPod(n *testNode) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-web"},
		Spec: corev1.PodSpec{
			NodeName:       "node-1",
			InitContainers: []corev1.Container{{Name: "init", Image: "busybox"}},
			Containers:     []corev1.Container{{Name: "app", Image: "nginx"}, {Name: "sidecar", Image: "busybox"}},
		},
	}
	n.pods.add(pod)
	n.rt.set(&runtime.PodStatus{
		UID: pod.UID, Name: pod.Name, Namespace: pod.Namespace,
		Sandboxes: []runtime.SandboxStatus{{ID: "sb-web", State: runtime.StateRunning}},
		Containers: []runtime.ContainerStatus{
			{ID: "c-app", Name: "app", State: runtime.StateRunning, SandboxID: "sb-web"},
			{ID: "c-init", Name: "init", Init: true, State: runtime.StateExited, SandboxID: "sb-web"},
		},
	})
	return pod
}

func TestNewRequiresSeams(t *testing.T) {
	ok := Config{ClientCAs: x509.NewCertPool(), Pods: func() []*corev1.Pod { return nil }, Runtime: newFakeRuntime()}
	for name, mutate := range map[string]func(*Config){
		"no ClientCAs": func(c *Config) { c.ClientCAs = nil },
		"no Pods":      func(c *Config) { c.Pods = nil },
		"no Runtime":   func(c *Config) { c.Runtime = nil },
	} {
		cfg := ok
		mutate(&cfg)
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
	if _, err := New(ok); err != nil {
		t.Errorf("complete config: %v", err)
	}
}

func TestAuthentication(t *testing.T) {
	n := newTestNode(t, nil)
	webPod(n)
	paths := []struct{ method, path string }{
		{"GET", "/pods"},
		{"GET", "/containerLogs/default/web/app"},
		{"GET", "/exec/default/web/app?command=ls&output=1"},
		{"POST", "/exec/default/web/app?command=ls&output=1"},
		{"POST", "/attach/default/web/app?output=1"},
		{"GET", "/portForward/default/web"},
		{"POST", "/portForward/default/web"},
		{"POST", "/run/default/web/app?cmd=ls"},
		{"GET", "/stats/summary"},
		{"GET", "/metrics/resource"},
	}
	for _, p := range paths {
		for who, want := range map[string]int{"anonymous": http.StatusUnauthorized, "user": http.StatusForbidden} {
			code, body := n.doAs(t, who, p.method, p.path)
			if code != want {
				t.Errorf("%s %s as %s: %d, want %d (%s)", p.method, p.path, who, code, want, body)
				continue
			}
			// Upstream kubelet's plain answers.
			if want == http.StatusUnauthorized && body != "Unauthorized" ||
				want == http.StatusForbidden && !strings.HasPrefix(body, "Forbidden (user=jane, verb=") {
				t.Errorf("%s %s as %s: body %q", p.method, p.path, who, body)
			}
		}
	}
	// The allowed user and system:masters get past authorization (the
	// handlers answer, whatever they answer).
	for _, who := range []string{"apiserver", "admin"} {
		for _, p := range []string{"/pods", "/stats/summary", "/metrics/resource", "/containerLogs/default/web/nosuch"} {
			code, body := n.doAs(t, who, "GET", p)
			if code == http.StatusUnauthorized || code == http.StatusForbidden {
				t.Errorf("GET %s as %s: %d %s", p, who, code, body)
			}
		}
	}
	// /healthz is authorized as every other path (upstream's kubelet
	// serves it behind the same filter on its secure port).
	for who, want := range map[string]int{"anonymous": http.StatusUnauthorized, "user": http.StatusForbidden, "apiserver": http.StatusOK} {
		if code, body := n.doAs(t, who, "GET", "/healthz"); code != want || want == http.StatusOK && body != "ok" {
			t.Errorf("/healthz as %s: %d %q, want %d", who, code, body, want)
		}
	}
	// A certificate of another CA does not get through the handshake.
	if resp, err := n.clients["stranger"].Get(n.url + "/pods"); err == nil {
		resp.Body.Close()
		t.Errorf("a certificate of another CA was accepted: %d", resp.StatusCode)
	}
}

func TestForbiddenNamesUserAndAccess(t *testing.T) {
	n := newTestNode(t, nil)
	code, body := n.doAs(t, "user", "GET", "/pods")
	if code != http.StatusForbidden || body != "Forbidden (user=jane, verb=get, resource=nodes, subresource(s)=[pods proxy])\n" {
		t.Errorf("forbidden answer: %d %q", code, body)
	}
}

func TestAllowedIdentitiesConfigurable(t *testing.T) {
	n := newTestNode(t, func(c *Config) { c.AllowedGroups = []string{"developers"} })
	for who, want := range map[string]int{"user": http.StatusOK, "apiserver": http.StatusForbidden, "admin": http.StatusForbidden} {
		if code, body := n.doAs(t, who, "GET", "/pods"); code != want {
			t.Errorf("/pods as %s: %d, want %d (%s)", who, code, want, body)
		}
	}
}

func TestPods(t *testing.T) {
	n := newTestNode(t, nil)
	code, body := n.do(t, "GET", "/pods")
	var list corev1.PodList
	if err := json.Unmarshal([]byte(body), &list); err != nil || code != http.StatusOK {
		t.Fatalf("empty node: %d %v %s", code, err, body)
	}
	if list.Kind != "PodList" || list.APIVersion != "v1" || len(list.Items) != 0 {
		t.Errorf("empty node: %+v", list)
	}
	webPod(n)
	n.pods.add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "dns", UID: "uid-dns"}})
	_, body = n.do(t, "GET", "/pods")
	list = corev1.PodList{}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range list.Items {
		got = append(got, p.Namespace+"/"+p.Name+"/"+string(p.UID))
	}
	if want := []string{"default/web/uid-web", "kube-system/dns/uid-dns"}; !slices.Equal(got, want) {
		t.Errorf("pods = %v, want %v", got, want)
	}
	if len(list.Items) > 0 && (len(list.Items[0].Spec.Containers) != 2 || list.Items[0].Spec.NodeName != "node-1") {
		t.Errorf("pod spec not carried: %+v", list.Items[0].Spec)
	}
}

func TestStats(t *testing.T) {
	n := newTestNode(t, nil)
	code, body := n.do(t, "GET", "/stats/summary")
	var sum statsv1alpha1.Summary
	if err := json.Unmarshal([]byte(body), &sum); err != nil || code != http.StatusOK || sum.Node.NodeName != "node-1" {
		t.Errorf("/stats/summary: %d %v %s", code, err, body)
	}
	if code, body := n.do(t, "GET", "/metrics/resource"); code != http.StatusOK || !strings.Contains(body, "node_cpu_usage_seconds_total 1") {
		t.Errorf("/metrics/resource: %d %s", code, body)
	}

	none := newTestNode(t, func(c *Config) { c.Stats = nil })
	for _, p := range []string{"/stats/summary", "/metrics/resource"} {
		code, body := none.do(t, "GET", p)
		if st := status(t, body); code != http.StatusServiceUnavailable || st.Code != http.StatusServiceUnavailable {
			t.Errorf("%s without stats: %d %s", p, code, body)
		}
	}
}

// A certificate the control plane issues is served once it is there;
// until then the handshake fails, as upstream kubelet's. (Served by
// Serve: httptest would add a certificate of its own.)
func TestIssuedServingCertificate(t *testing.T) {
	ca := newTestCA(t, "cluster-ca")
	var issued atomic.Pointer[tls.Certificate]
	s, err := New(Config{ClientCAs: ca.pool, Pods: (&fakePods{}).list, Runtime: newFakeRuntime(),
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c := issued.Load(); c != nil {
				return c, nil
			}
			return nil, errors.New("no serving certificate issued yet")
		},
		Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	caller := ca.issue(t, pkix.Name{CommonName: APIServerUser}, false)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &caller, nil }}}}
	url := "https://" + ln.Addr().String() + "/healthz"
	if resp, err := client.Get(url); err == nil {
		resp.Body.Close()
		t.Fatal("served before a certificate was issued")
	}
	cert := ca.issue(t, pkix.Name{CommonName: "node-1"}, true)
	issued.Store(&cert)
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if body, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK || string(body) != "ok" {
		t.Errorf("GET /healthz = %d %q", resp.StatusCode, body)
	}
}
