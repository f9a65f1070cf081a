package apiserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	clientexec "k8s.io/client-go/util/exec"
	streamportforward "k8s.io/cri-streaming/pkg/streaming/portforward"
	streamremotecommand "k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/controlplane/storage"
)

// nodeRequest is what the fake nodelet saw of one request.
type nodeRequest struct {
	method, path string
	query        url.Values
	header       http.Header
}

// fakeNodelet is a node's HTTPS API: it records every request and
// answers /containerLogs, /exec and /portForward as a nodelet would,
// everything else with a line naming the request.
type fakeNodelet struct {
	ts *httptest.Server

	mu   sync.Mutex
	reqs []nodeRequest
	// logs, when set, answers /containerLogs.
	logs http.HandlerFunc
}

func newFakeNodelet(t *testing.T) *fakeNodelet {
	t.Helper()
	n := &fakeNodelet{}
	n.ts = httptest.NewTLSServer(http.HandlerFunc(n.serve))
	t.Cleanup(func() {
		n.ts.CloseClientConnections()
		n.ts.Close()
	})
	return n
}

func (n *fakeNodelet) serve(w http.ResponseWriter, r *http.Request) {
	n.mu.Lock()
	n.reqs = append(n.reqs, nodeRequest{method: r.Method, path: r.URL.Path, query: r.URL.Query(), header: r.Header.Clone()})
	logs := n.logs
	n.mu.Unlock()
	switch first, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/"); first {
	case "containerLogs":
		if logs != nil {
			logs(w, r)
			return
		}
		fmt.Fprintf(w, "log of %s\n", r.URL.Path)
	case "exec":
		opts, err := streamremotecommand.NewOptions(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		streamremotecommand.ServeExec(w, r, echoExecutor{}, "pod", "uid", "container", r.URL.Query()["command"], opts,
			time.Minute, 10*time.Second, streamremotecommand.SupportedStreamingProtocols)
	case "portForward":
		opts, err := streamportforward.NewV4Options(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		streamportforward.ServePortForward(w, r, echoForwarder{}, "pod", "uid", opts, time.Minute, 10*time.Second, streamportforward.SupportedProtocols)
	case "redirect":
		http.Redirect(w, r, "https://example.com/", http.StatusFound)
	default:
		fmt.Fprintf(w, "nodelet: %s %s?%s", r.Method, r.URL.Path, r.URL.RawQuery)
	}
}

func (n *fakeNodelet) requests() []nodeRequest {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]nodeRequest(nil), n.reqs...)
}

func (n *fakeNodelet) setLogs(h http.HandlerFunc) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.logs = h
}

// echoExecutor answers with the command and the input it read.
type echoExecutor struct{}

func (echoExecutor) ExecInContainer(_ context.Context, _, _, _ string, cmd []string, in io.Reader, out, errOut io.WriteCloser, tty bool, _ <-chan streamremotecommand.TerminalSize, _ time.Duration) error {
	var input []byte
	if in != nil {
		var err error
		if input, err = io.ReadAll(in); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "ran %q tty=%v input %q", cmd, tty, input)
	if errOut != nil {
		fmt.Fprint(errOut, "on stderr")
	}
	if cmd[0] == "fail" {
		return utilexec.CodeExitError{Err: errors.New("exit status 7"), Code: 7}
	}
	return nil
}

// echoForwarder answers what it reads with the port it was sent to.
type echoForwarder struct{}

func (echoForwarder) PortForward(_ context.Context, _, _ string, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	buf := make([]byte, 4)
	if _, err := io.ReadFull(stream, buf); err != nil {
		return err
	}
	_, err := fmt.Fprintf(stream, "%s from %d", buf, port)
	return err
}

// fakeConnector locates every node at one URL.
type fakeConnector struct {
	mu    sync.Mutex
	base  *url.URL
	rt    http.RoundTripper
	err   error
	nodes []string
}

func (c *fakeConnector) NodeLocation(node *corev1.Node) (*url.URL, http.RoundTripper, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nodes = append(c.nodes, node.Name)
	if c.err != nil {
		return nil, nil, c.err
	}
	u := *c.base
	return &u, c.rt, nil
}

func (c *fakeConnector) set(base *url.URL, rt http.RoundTripper, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.base, c.rt, c.err = base, rt, err
}

// proxyEnv is a test API server whose nodes are one fake nodelet, with
// node-1 and the pods:
//   - web on node-1: init container "init", containers "app" and "sidecar"
//   - solo on node-1: one container "app"
//   - pending: not scheduled
//   - lost: on node "ghost", which has no Node object
type proxyEnv struct {
	*testEnv
	node *fakeNodelet
	conn *fakeConnector
}

func newProxyEnv(t *testing.T) *proxyEnv {
	t.Helper()
	env := newTestEnv(t, storage.HubOptions{}, nil)
	node := newFakeNodelet(t)
	base, err := url.Parse(node.ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	conn := &fakeConnector{base: base, rt: node.ts.Client().Transport}
	env.srv.cfg.Nodes = conn // before the first request
	createProxyObjects(t, env)
	return &proxyEnv{testEnv: env, node: node, conn: conn}
}

func createProxyObjects(t *testing.T, env *testEnv) {
	t.Helper()
	cs := env.clientset(t)
	ctx := testCtx(t)
	if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	web := testPod("web", "node-1")
	web.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox"}}
	web.Spec.Containers = append(web.Spec.Containers, corev1.Container{Name: "sidecar", Image: "busybox"})
	for _, p := range []*corev1.Pod{web, testPod("solo", "node-1"), testPod("pending", ""), testPod("lost", "ghost")} {
		if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create pod %s: %v", p.Name, err)
		}
	}
}

// do sends one request as the admin, with extra headers.
func (e *proxyEnv) do(t *testing.T, method, path string, header http.Header) (int, string) {
	t.Helper()
	return doWith(t, e.testEnv, method, path, header)
}

func doWith(t *testing.T, env *testEnv, method, path string, header http.Header) (int, string) {
	t.Helper()
	hc, err := rest.HTTPClientFor(env.config)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(testCtx(t), method, env.config.Host+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, path, err)
	}
	return resp.StatusCode, string(body)
}

// statusMessage is the message of a Status answer, else the whole body.
func statusMessage(body string) string {
	var st metav1.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil || st.Kind != "Status" {
		return body
	}
	return st.Message
}

var bearer = http.Header{"Authorization": {"Bearer s3cret-for-the-api-server"}}

func TestPodLogProxied(t *testing.T) {
	env := newProxyEnv(t)
	cs := env.clientset(t)
	ctx := testCtx(t)
	tests := []struct {
		name  string
		pod   string
		opts  corev1.PodLogOptions
		path  string
		query url.Values
	}{
		{"the only container", "solo", corev1.PodLogOptions{}, "/containerLogs/default/solo/app", url.Values{}},
		{"every option", "web", corev1.PodLogOptions{
			Container: "sidecar", Follow: true, Previous: true, Timestamps: true,
			TailLines: ptr.To[int64](10), LimitBytes: ptr.To[int64](4096), SinceSeconds: ptr.To[int64](60),
		}, "/containerLogs/default/web/sidecar", url.Values{
			"follow": {"true"}, "previous": {"true"}, "timestamps": {"true"},
			"tailLines": {"10"}, "limitBytes": {"4096"}, "sinceSeconds": {"60"},
		}},
		{"init container, sinceTime", "web", corev1.PodLogOptions{
			Container: "init", TailLines: ptr.To[int64](0), SinceTime: &metav1.Time{Time: time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)},
		}, "/containerLogs/default/web/init", url.Values{"tailLines": {"0"}, "sinceTime": {"2025-03-04T05:06:07Z"}}},
	}
	for _, tt := range tests {
		before := len(env.node.requests())
		body, err := cs.CoreV1().Pods("default").GetLogs(tt.pod, &tt.opts).DoRaw(ctx)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if want := "log of " + tt.path + "\n"; string(body) != want {
			t.Errorf("%s: body %q, want %q", tt.name, body, want)
		}
		reqs := env.node.requests()[before:]
		if len(reqs) != 1 {
			t.Errorf("%s: the node got %d requests", tt.name, len(reqs))
			continue
		}
		if r := reqs[0]; r.method != "GET" || r.path != tt.path || !reflect.DeepEqual(r.query, tt.query) {
			t.Errorf("%s: the node got %s %s %v, want GET %s %v", tt.name, r.method, r.path, r.query, tt.path, tt.query)
		}
	}
}

func TestPodLogStreams(t *testing.T) {
	env := newProxyEnv(t)
	release := make(chan struct{})
	var releaseOnce sync.Once
	releaseNode := func() { releaseOnce.Do(func() { close(release) }) }
	defer releaseNode()
	env.node.setLogs(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "second\n")
	})
	stream, err := env.clientset(t).CoreV1().Pods("default").GetLogs("solo", &corev1.PodLogOptions{Follow: true}).Stream(streamCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	lines := bufio.NewReader(stream)
	// The first line arrives while the node still holds the stream open.
	got := make(chan string, 1)
	go func() {
		l, _ := lines.ReadString('\n')
		got <- l
	}()
	select {
	case l := <-got:
		if l != "first\n" {
			t.Errorf("first line %q", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first line was held back")
	}
	releaseNode()
	if l, err := lines.ReadString('\n'); l != "second\n" {
		t.Errorf("second line %q %v", l, err)
	}
	if rest, err := io.ReadAll(lines); len(rest) != 0 || err != nil {
		t.Errorf("after the end: %q %v", rest, err)
	}
}

func TestPodLogNodeErrorPassesThrough(t *testing.T) {
	env := newProxyEnv(t)
	env.node.setLogs(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"container \"app\" in pod \"solo\" is waiting to start: ContainerCreating","reason":"BadRequest","code":400}`)
	})
	// As kubectl logs reads it.
	stream, err := env.clientset(t).CoreV1().Pods("default").GetLogs("solo", &corev1.PodLogOptions{}).Stream(testCtx(t))
	if err == nil {
		stream.Close()
	}
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), `container "app" in pod "solo" is waiting to start`) {
		t.Errorf("node's refusal: %v", err)
	}
}

func TestConnectRefusedBeforeTheNode(t *testing.T) {
	env := newProxyEnv(t)
	const pods = "/api/v1/namespaces/default/pods/"
	tests := []struct {
		name, method, path string
		code               int
		msg                string
	}{
		{"negative tailLines", "GET", pods + "solo/log?tailLines=-1", 422, "tailLines"},
		{"zero limitBytes", "GET", pods + "solo/log?limitBytes=0", 422, "limitBytes"},
		{"zero sinceSeconds", "GET", pods + "solo/log?sinceSeconds=0", 422, "sinceSeconds"},
		{"both since", "GET", pods + "solo/log?sinceSeconds=10&sinceTime=2025-01-01T00:00:00Z", 422, "at most one of `sinceTime` or `sinceSeconds`"},
		{"bad sinceTime", "GET", pods + "solo/log?sinceTime=yesterday", 422, "sinceTime"},
		{"bad follow", "GET", pods + "solo/log?follow=maybe", 422, "follow"},
		{"unknown container", "GET", pods + "web/log?container=nosuch", 400, "container nosuch is not valid for pod web"},
		{"container not named", "GET", pods + "web/log", 400, "a container name must be specified for pod web, choose one of: [app sidecar]"},
		{"log of a pod without node", "GET", pods + "pending/log", 400, "pod pending does not have a host assigned"},
		{"log of a missing pod", "GET", pods + "nosuch/log", 404, `pods "nosuch" not found`},
		{"log by POST", "POST", pods + "solo/log", 405, ""},
		{"exec without command", "POST", pods + "solo/exec?stdout=true", 400, "you must specify at least 1 command"},
		{"exec without streams", "POST", pods + "solo/exec?command=ls", 400, "you must specify at least 1 of stdin, stdout, stderr"},
		{"exec in an unknown container", "POST", pods + "web/exec?container=nosuch&command=ls&stdout=true", 400, "is not valid for pod web"},
		{"exec in a pod without node", "POST", pods + "pending/exec?command=ls&stdout=true", 400, "does not have a host assigned"},
		{"exec by PUT", "PUT", pods + "solo/exec?command=ls&stdout=true", 405, ""},
		{"attach without streams", "POST", pods + "solo/attach", 400, "at least 1 of stdin, stdout, stderr"},
		{"portforward of a pod without node", "POST", pods + "pending/portforward", 400, "does not have a host assigned"},
		{"log of a pod on a missing node", "GET", pods + "lost/log", 404, `nodes "ghost" not found`},
		{"proxy to a node and port", "GET", "/api/v1/nodes/node-1:10250/proxy/pods", 400, `invalid node name "node-1:10250"`},
		{"proxy to a scheme, node and port", "GET", "/api/v1/nodes/https:node-1:10250/proxy/pods", 400, "invalid node name"},
		{"proxy to a missing node", "GET", "/api/v1/nodes/nosuch/proxy/pods", 404, `nodes "nosuch" not found`},
	}
	for _, tt := range tests {
		code, body := env.do(t, tt.method, tt.path, nil)
		if code != tt.code || !strings.Contains(statusMessage(body), tt.msg) {
			t.Errorf("%s: %d %s, want %d with %q", tt.name, code, body, tt.code, tt.msg)
		}
	}
	if reqs := env.node.requests(); len(reqs) != 0 {
		t.Errorf("refused requests reached the node: %+v", reqs)
	}
}

func TestNodeProxy(t *testing.T) {
	env := newProxyEnv(t)
	for _, tt := range []struct {
		method, path, want string
	}{
		{"GET", "/api/v1/nodes/node-1/proxy/stats/summary?only_cpu_and_memory=true", "nodelet: GET /stats/summary?only_cpu_and_memory=true"},
		{"GET", "/api/v1/nodes/node-1/proxy/", "nodelet: GET /?"},
		{"GET", "/api/v1/nodes/node-1/proxy", "nodelet: GET /?"},
		{"GET", "/api/v1/nodes/node-1/proxy/pods", "nodelet: GET /pods?"},
		{"POST", "/api/v1/nodes/node-1/proxy/run/default/web/app?cmd=ls", "nodelet: POST /run/default/web/app?cmd=ls"},
		{"DELETE", "/api/v1/nodes/node-1/proxy/x", "nodelet: DELETE /x?"},
	} {
		code, body := env.do(t, tt.method, tt.path, bearer)
		if code != http.StatusOK || body != tt.want {
			t.Errorf("%s %s: %d %q, want %q", tt.method, tt.path, code, body, tt.want)
		}
	}
	// The node may not send the caller elsewhere.
	if code, body := env.do(t, "GET", "/api/v1/nodes/node-1/proxy/redirect", nil); code != http.StatusBadGateway {
		t.Errorf("redirect from the node: %d %s", code, body)
	}
	for _, r := range env.node.requests() {
		if h := r.header.Get("Authorization"); h != "" {
			t.Errorf("%s %s reached the node with Authorization %q", r.method, r.path, h)
		}
	}
	env.conn.mu.Lock()
	defer env.conn.mu.Unlock()
	for _, name := range env.conn.nodes {
		if name != "node-1" {
			t.Errorf("located node %q", name)
		}
	}
}

// TestAuthorizationNotForwarded sends the caller's bearer token with every
// kind of connect request: none reaches the node.
func TestAuthorizationNotForwarded(t *testing.T) {
	env := newProxyEnv(t)
	const pods = "/api/v1/namespaces/default/pods/"
	// X-Marker shows that the proxied requests do carry the caller's
	// other headers.
	plain := http.Header{"Authorization": bearer["Authorization"], "X-Marker": {"kept"}}
	upgrade := http.Header{
		"Authorization":             bearer["Authorization"],
		"X-Marker":                  {"kept"},
		"Connection":                {"Upgrade"},
		"Upgrade":                   {"SPDY/3.1"},
		"X-Stream-Protocol-Version": {"v4.channel.k8s.io"},
	}
	env.do(t, "GET", pods+"solo/log", plain)
	env.do(t, "GET", "/api/v1/nodes/node-1/proxy/pods", plain)
	env.doUpgrade(t, "POST", pods+"web/exec?container=app&command=ls&stdout=true", upgrade)
	upgrade.Set("X-Stream-Protocol-Version", "portforward.k8s.io")
	env.doUpgrade(t, "POST", pods+"web/portforward", upgrade)
	reqs := env.node.requests()
	if len(reqs) != 4 {
		t.Errorf("the node got %d requests, want 4: %+v", len(reqs), reqs)
	}
	for _, r := range reqs {
		if h := r.header.Get("Authorization"); h != "" {
			t.Errorf("%s %s reached the node with Authorization %q", r.method, r.path, h)
		}
		if r.path != "/containerLogs/default/solo/app" && r.header.Get("X-Marker") != "kept" {
			t.Errorf("%s %s reached the node without the caller's other headers: %v", r.method, r.path, r.header)
		}
	}
}

// doUpgrade sends an upgrade request over HTTP/1.1 and returns the status.
func (e *proxyEnv) doUpgrade(t *testing.T, method, path string, header http.Header) int {
	t.Helper()
	tlsCfg, err := rest.TLSConfigFor(e.config)
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg.NextProtos = []string{"http/1.1"}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}, Timeout: 20 * time.Second}
	req, err := http.NewRequest(method, e.config.Host+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// streamCtx bounds one exec session.
func streamCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestExecProxied(t *testing.T) {
	env := newProxyEnv(t)
	const path = "/api/v1/namespaces/default/pods/web/exec"
	q := url.Values{"container": {"sidecar"}, "command": {"sh", "-c", "echo hi"}, "stdin": {"true"}, "stdout": {"true"}, "stderr": {"true"}}
	u, err := url.Parse(env.config.Host + path + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	executors := map[string]func(*url.URL) (remotecommand.Executor, error){
		"spdy": func(u *url.URL) (remotecommand.Executor, error) {
			return remotecommand.NewSPDYExecutor(env.config, "POST", u)
		},
		"websocket": func(u *url.URL) (remotecommand.Executor, error) {
			return remotecommand.NewWebSocketExecutor(env.config, "GET", u.String())
		},
	}
	for name, newExecutor := range executors {
		before := len(env.node.requests())
		ex, err := newExecutor(u)
		if err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		err = ex.StreamWithContext(streamCtx(t), remotecommand.StreamOptions{Stdin: strings.NewReader("typed"), Stdout: &out, Stderr: &errOut})
		if err != nil || out.String() != `ran ["sh" "-c" "echo hi"] tty=false input "typed"` || errOut.String() != "on stderr" {
			t.Errorf("%s: %q %q %v", name, out.String(), errOut.String(), err)
		}
		reqs := env.node.requests()[before:]
		want := url.Values{"command": {"sh", "-c", "echo hi"}, "input": {"1"}, "output": {"1"}, "error": {"1"}}
		if len(reqs) != 1 || reqs[0].path != "/exec/default/web/sidecar" || !reflect.DeepEqual(reqs[0].query, want) {
			t.Errorf("%s: the node got %+v", name, reqs)
		}

		// The command's exit code comes back.
		fq := url.Values{"command": {"fail"}, "stdout": {"true"}}
		fu, _ := url.Parse(env.config.Host + "/api/v1/namespaces/default/pods/solo/exec?" + fq.Encode())
		if ex, err = newExecutor(fu); err != nil {
			t.Fatal(err)
		}
		out.Reset()
		err = ex.StreamWithContext(streamCtx(t), remotecommand.StreamOptions{Stdout: &out})
		var exit clientexec.CodeExitError
		if !errors.As(err, &exit) || exit.Code != 7 || out.String() != `ran ["fail"] tty=false input ""` {
			t.Errorf("%s: failing command: %v (%T) %q", name, err, err, out.String())
		}
	}
	// With a terminal, stderr is stdout.
	tq := url.Values{"command": {"sh"}, "stdout": {"true"}, "stderr": {"true"}, "tty": {"true"}}
	tu, _ := url.Parse(env.config.Host + "/api/v1/namespaces/default/pods/solo/exec?" + tq.Encode())
	before := len(env.node.requests())
	ex, err := remotecommand.NewSPDYExecutor(env.config, "POST", tu)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := ex.StreamWithContext(streamCtx(t), remotecommand.StreamOptions{Stdout: &out, Tty: true}); err != nil || !strings.Contains(out.String(), "tty=true") {
		t.Errorf("tty: %q %v", out.String(), err)
	}
	want := url.Values{"command": {"sh"}, "output": {"1"}, "tty": {"1"}}
	if reqs := env.node.requests()[before:]; len(reqs) != 1 || reqs[0].path != "/exec/default/solo/app" || !reflect.DeepEqual(reqs[0].query, want) {
		t.Errorf("tty: the node got %+v", reqs)
	}
}

func TestPortForwardProxied(t *testing.T) {
	env := newProxyEnv(t)
	u, err := url.Parse(env.config.Host + "/api/v1/namespaces/default/pods/web/portforward")
	if err != nil {
		t.Fatal(err)
	}
	tr, upgrader, err := spdy.RoundTripperFor(env.config)
	if err != nil {
		t.Fatal(err)
	}
	spdyDialer := spdy.NewDialer(upgrader, &http.Client{Transport: tr}, "POST", u)
	wsDialer, err := portforward.NewSPDYOverWebsocketDialer(u, env.config)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		dialer httpstream.Dialer
	}{{"spdy", spdyDialer}, {"websocket", wsDialer}} {
		before := len(env.node.requests())
		stop, ready := make(chan struct{}), make(chan struct{})
		pf, err := portforward.NewOnAddresses(tt.dialer, []string{"127.0.0.1"}, []string{"0:8080"}, stop, ready, io.Discard, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() { errc <- pf.ForwardPorts() }()
		select {
		case <-ready:
		case err := <-errc:
			t.Fatalf("%s: %v", tt.name, err)
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: not ready", tt.name)
		}
		ports, err := pf.GetPorts()
		if err != nil || len(ports) != 1 {
			t.Fatalf("%s: ports %v %v", tt.name, ports, err)
		}
		got, err := pingPort(ports[0].Local)
		if err != nil || got != "ping from 8080" {
			t.Errorf("%s: forwarded answer %q %v", tt.name, got, err)
		}
		close(stop)
		<-errc
		if reqs := env.node.requests()[before:]; len(reqs) != 1 || reqs[0].path != "/portForward/default/web" {
			t.Errorf("%s: the node got %+v", tt.name, reqs)
		}
	}
}

func pingPort(port uint16) (string, error) {
	conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 5*time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := conn.Write([]byte("ping")); err != nil {
		return "", err
	}
	got, err := io.ReadAll(conn)
	return string(got), err
}

func TestUnreachableNode(t *testing.T) {
	env := newProxyEnv(t)
	// A port nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := &url.URL{Scheme: "https", Host: ln.Addr().String()}
	ln.Close()
	env.conn.set(dead, &http.Transport{}, nil)
	const pods = "/api/v1/namespaces/default/pods/"
	for _, tt := range []struct{ method, path string }{
		{"GET", pods + "solo/log"},
		{"GET", "/api/v1/nodes/node-1/proxy/pods"},
	} {
		start := time.Now()
		code, body := env.do(t, tt.method, tt.path, nil)
		if code != http.StatusServiceUnavailable {
			t.Errorf("%s %s: %d %s", tt.method, tt.path, code, body)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s %s took %v", tt.method, tt.path, d)
		}
	}
	upgrade := http.Header{"Connection": {"Upgrade"}, "Upgrade": {"SPDY/3.1"}, "X-Stream-Protocol-Version": {"v4.channel.k8s.io", "portforward.k8s.io"}}
	for _, path := range []string{pods + "solo/exec?command=ls&stdout=true", pods + "solo/portforward"} {
		start := time.Now()
		if code := env.doUpgrade(t, "POST", path, upgrade); code != http.StatusServiceUnavailable {
			t.Errorf("upgrade %s: %d", path, code)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("upgrade %s took %v", path, d)
		}
	}

	// A node the connector cannot place is unavailable too.
	env.conn.set(nil, nil, errors.New("node node-1 has no address"))
	code, body := env.do(t, "GET", pods+"solo/log", nil)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "has no address") {
		t.Errorf("node without address: %d %s", code, body)
	}
}

func TestConnectWithoutNodes(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	createProxyObjects(t, env)
	for _, p := range []string{
		"/api/v1/namespaces/default/pods/solo/log",
		"/api/v1/namespaces/default/pods/solo/exec?command=ls&stdout=true",
		"/api/v1/namespaces/default/pods/solo/portforward",
		"/api/v1/nodes/node-1/proxy/pods",
	} {
		if code, body := doWith(t, env, "GET", p, nil); code != http.StatusServiceUnavailable || !strings.Contains(body, "cannot reach nodes") {
			t.Errorf("%s: %d %s", p, code, body)
		}
	}
}

func TestDiscoveryConnectSubresources(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	list, err := env.clientset(t).Discovery().ServerResourcesForGroupVersion("v1")
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]metav1.APIResource{}
	var names []string
	for _, r := range list.APIResources {
		byName[r.Name] = r
		names = append(names, r.Name)
	}
	want := map[string]struct {
		kind       string
		namespaced bool
		verbs      []string
	}{
		"pods/attach":      {"PodAttachOptions", true, []string{"create", "get"}},
		"pods/binding":     {"Binding", true, []string{"create"}},
		"pods/exec":        {"PodExecOptions", true, []string{"create", "get"}},
		"pods/log":         {"Pod", true, []string{"get"}},
		"pods/portforward": {"PodPortForwardOptions", true, []string{"create", "get"}},
		"pods/proxy":       {"PodProxyOptions", true, []string{"create", "delete", "get", "patch", "update"}},
		"services/proxy":   {"ServiceProxyOptions", true, []string{"create", "delete", "get", "patch", "update"}},
		"pods/status":      {"Pod", true, []string{"get", "patch", "update"}},
		"nodes/proxy":      {"NodeProxyOptions", false, []string{"create", "delete", "get", "patch", "update"}},
		"nodes/status":     {"Node", false, []string{"get", "patch", "update"}},
	}
	for name, w := range want {
		r, ok := byName[name]
		if !ok {
			t.Errorf("%s not discovered", name)
			continue
		}
		if r.Kind != w.kind || r.Namespaced != w.namespaced || !reflect.DeepEqual([]string(r.Verbs), w.verbs) || r.Group != "" || r.Version != "" {
			t.Errorf("%s: %+v, want kind %s namespaced %v verbs %v", name, r, w.kind, w.namespaced, w.verbs)
		}
	}
	// As upstream: sorted, each subresource after its resource.
	if !slices.IsSorted(names) {
		t.Errorf("resources not sorted: %v", names)
	}
	for _, n := range names {
		if strings.HasPrefix(n, "pods/") && !slices.Contains(names, "pods") || strings.HasPrefix(n, "nodes/") && !slices.Contains(names, "nodes") {
			t.Errorf("%s without its resource", n)
		}
	}
}
