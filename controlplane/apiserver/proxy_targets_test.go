package apiserver

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/utils/ptr"
)

func TestPodProxyHost(t *testing.T) {
	pod := func(ip string, ports ...corev1.ContainerPort) *corev1.Pod {
		p := testPod("web", "node-1")
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "web", Ports: ports})
		if ip != "" {
			p.Status.PodIPs = []corev1.PodIP{{IP: ip}}
		}
		return p
	}
	http8080 := corev1.ContainerPort{Name: "http", ContainerPort: 8080}
	for _, tt := range []struct {
		name, port string
		pod        *corev1.Pod
		want, err  string
	}{
		{"number", "80", pod("10.244.0.5"), "10.244.0.5:80", ""},
		{"first container port", "", pod("10.244.0.5", http8080), "10.244.0.5:8080", ""},
		{"no port at all", "", pod("10.244.0.5"), "10.244.0.5", ""},
		{"named container port", "http", pod("10.244.0.5", http8080), "10.244.0.5:8080", ""},
		{"IPv6", "80", pod("fd00::5"), "[fd00::5]:80", ""},
		{"IPv6 without port", "", pod("fd00::5"), "[fd00::5]", ""},
		{"unknown port name", "metrics", pod("10.244.0.5", http8080), "", `pod "web" has no port named "metrics"`},
		{"port out of range", "70000", pod("10.244.0.5"), "", `invalid port "70000"`},
		{"port zero", "0", pod("10.244.0.5"), "", `invalid port "0"`},
		{"no pod IP", "80", pod(""), "", "address not allowed"},
		{"loopback", "80", pod("127.0.0.1"), "", "address not allowed"},
		{"IPv6 loopback", "80", pod("::1"), "", "address not allowed"},
		{"link-local", "80", pod("169.254.169.254"), "", "address not allowed"},
		{"IPv6 link-local", "80", pod("fe80::1"), "", "address not allowed"},
		{"unspecified", "80", pod("0.0.0.0"), "", "address not allowed"},
		{"multicast", "80", pod("224.0.0.1"), "", "address not allowed"},
		{"not an IP", "80", pod("example.com"), "", "address not allowed"},
	} {
		got, err := podProxyHost(tt.pod, tt.port)
		switch {
		case tt.err != "" && (err == nil || !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s: %q %v, want a bad request %q", tt.name, got, err, tt.err)
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("%s: %q %v, want %q", tt.name, got, err, tt.want)
		}
	}
}

// podRequest is what the fake pod network received.
type podRequest struct {
	method, url string
	header      http.Header
}

// fakePods stands for the pod network: it answers every request with
// "pod: METHOD URL" and records it.
type fakePods struct {
	mu   sync.Mutex
	reqs []podRequest
}

func (f *fakePods) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	f.reqs = append(f.reqs, podRequest{method: r.Method, url: r.URL.String(), header: r.Header.Clone()})
	f.mu.Unlock()
	body := fmt.Sprintf("pod: %s %s", r.Method, r.URL)
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/plain"}},
		Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: r}, nil
}

func (f *fakePods) last() podRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reqs) == 0 {
		return podRequest{}
	}
	return f.reqs[len(f.reqs)-1]
}

// proxyAuthz allows everything and records the attributes.
type proxyAuthz struct {
	mu    sync.Mutex
	attrs []authorizer.Attributes
}

func (a *proxyAuthz) Authorize(_ context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.attrs = append(a.attrs, attrs)
	return authorizer.DecisionAllow, "", nil
}

func (a *proxyAuthz) last() authorizer.Attributes {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.attrs[len(a.attrs)-1]
}

// newPodProxyEnv is a proxyEnv whose pods are reached through fakePods,
// with the pods:
//   - server (10.244.0.5), container port 8080 named http
//   - other (10.244.0.6), ports 80 and 9090 (metrics)
//   - solo: no IP yet
//   - local: status.podIP 127.0.0.1
//
// and the Service web (port 80 "http" → 8080, port 9090 "metrics"),
// whose EndpointSlice lists server ready, other not ready.
func newPodProxyEnv(t *testing.T) (*proxyEnv, *fakePods, *proxyAuthz) {
	t.Helper()
	env := newProxyEnv(t)
	pods, authz := &fakePods{}, &proxyAuthz{}
	env.srv.podTransport = pods
	env.srv.cfg.Authz = authorizer.AuthorizerFunc(authz.Authorize)
	cs := env.clientset(t)
	ctx := testCtx(t)
	for _, p := range []struct {
		name, ip string
		ports    []corev1.ContainerPort
	}{
		{"server", "10.244.0.5", []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}},
		{"other", "10.244.0.6", []corev1.ContainerPort{{ContainerPort: 80}, {Name: "metrics", ContainerPort: 9090}}},
		{"local", "127.0.0.1", nil},
	} {
		pod := testPod(p.name, "node-1")
		pod.Spec.Containers[0].Ports = p.ports
		got, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("pod %s: %v", p.name, err)
		}
		got.Status.PodIP, got.Status.PodIPs = p.ip, []corev1.PodIP{{IP: p.ip}}
		if _, err := cs.CoreV1().Pods("default").UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("pod %s status: %v", p.name, err)
		}
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "web"},
		Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)},
			{Name: "metrics", Port: 9090},
		}}}
	if _, err := cs.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createSlice(t, env, "web", []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}, {Name: ptr.To("metrics"), Port: ptr.To[int32](9090)}},
		endpoint("10.244.0.5", "server", true), endpoint("10.244.0.6", "other", false))
	return env, pods, authz
}

func endpoint(ip, pod string, ready bool) discoveryv1.Endpoint {
	ep := discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}
	if pod != "" {
		ep.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: pod}
	}
	return ep
}

func createSlice(t *testing.T, env *proxyEnv, service string, ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) {
	t.Helper()
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{GenerateName: service + "-", Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: discoveryv1.AddressTypeIPv4, Ports: ports, Endpoints: eps,
	}
	if _, err := env.clientset(t).DiscoveryV1().EndpointSlices("default").Create(testCtx(t), slice, metav1.CreateOptions{}); err != nil {
		t.Fatalf("endpoint slice of %s: %v", service, err)
	}
}

func TestPodProxy(t *testing.T) {
	env, pods, authz := newPodProxyEnv(t)
	const base = "/api/v1/namespaces/default/pods/"
	for _, tt := range []struct {
		method, path, url, verb string
	}{
		{"GET", base + "server/proxy/", "http://10.244.0.5:8080/", "get"},
		{"GET", base + "server:80/proxy", "http://10.244.0.5:80/", "get"},
		{"GET", base + "server:http/proxy/a/b?x=1&y=2", "http://10.244.0.5:8080/a/b?x=1&y=2", "get"},
		{"GET", base + "https:other:9090/proxy/metrics", "https://10.244.0.6:9090/metrics", "get"},
		{"GET", base + "other:metrics/proxy/metrics?watch=1", "http://10.244.0.6:9090/metrics?watch=1", "get"},
		{"HEAD", base + "server/proxy/x", "http://10.244.0.5:8080/x", "get"},
		{"POST", base + "server/proxy/x", "http://10.244.0.5:8080/x", "create"},
		{"PUT", base + "server/proxy/x", "http://10.244.0.5:8080/x", "update"},
		{"PATCH", base + "server/proxy/x", "http://10.244.0.5:8080/x", "patch"},
		{"DELETE", base + "server/proxy/x/", "http://10.244.0.5:8080/x/", "delete"},
		{"OPTIONS", base + "server/proxy/x", "http://10.244.0.5:8080/x", ""},
	} {
		code, body := env.do(t, tt.method, tt.path, bearer)
		got := pods.last()
		if code != http.StatusOK || got.method != tt.method || got.url != tt.url {
			t.Errorf("%s %s: %d %q; the pod got %s %s, want %s", tt.method, tt.path, code, body, got.method, got.url, tt.url)
		}
		if got.header.Get("Authorization") != "" {
			t.Errorf("%s %s: the caller's credentials reached the pod", tt.method, tt.path)
		}
		a := authz.last()
		if a.GetResource() != "pods" || a.GetSubresource() != "proxy" || a.GetVerb() != tt.verb || a.GetNamespace() != "default" {
			t.Errorf("%s %s: authorized as %s %s/%s in %q", tt.method, tt.path, a.GetVerb(), a.GetResource(), a.GetSubresource(), a.GetNamespace())
		}
	}
	if h := pods.last().header.Get("X-Forwarded-Uri"); h != base+"server/proxy/x" {
		t.Errorf("X-Forwarded-Uri %q", h)
	}
}

func TestPodProxyRefused(t *testing.T) {
	env, pods, _ := newPodProxyEnv(t)
	before := len(pods.reqs)
	const base = "/api/v1/namespaces/default/pods/"
	for _, tt := range []struct {
		method, path string
		code         int
		msg          string
	}{
		{"GET", base + "solo/proxy/", 400, "address not allowed"},
		{"GET", base + "local/proxy/", 400, "address not allowed"},
		{"GET", base + "nosuch:80/proxy/", 404, `pods "nosuch" not found`},
		{"GET", base + "ftp:server:80/proxy/", 400, `invalid pod request "ftp:server:80"`},
		{"GET", base + "a:server:80:1/proxy/", 400, `invalid pod request`},
		{"GET", base + "server:nosuch/proxy/", 400, `pod "server" has no port named "nosuch"`},
		{"CONNECT", base + "server/proxy/", 405, ""},
		{"GET", base + "server/log/extra", 404, ""},
	} {
		code, body := env.do(t, tt.method, tt.path, nil)
		if code != tt.code || !strings.Contains(statusMessage(body), tt.msg) {
			t.Errorf("%s %s: %d %q, want %d %q", tt.method, tt.path, code, statusMessage(body), tt.code, tt.msg)
		}
	}
	if n := len(pods.reqs) - before; n != 0 {
		t.Errorf("refused requests reached pods %d times: %+v", n, pods.reqs[before:])
	}
}

func TestServiceProxyEndpoint(t *testing.T) {
	env, pods, authz := newPodProxyEnv(t)
	const base = "/api/v1/namespaces/default/services/"
	for _, tt := range []struct {
		path, url string
	}{
		{base + "web:80/proxy/", "http://10.244.0.5:8080/"},
		{base + "web:http/proxy/x?q=1", "http://10.244.0.5:8080/x?q=1"},
		{base + "https:web:9090/proxy/metrics", "https://10.244.0.5:9090/metrics"},
		{base + "web:metrics/proxy/metrics", "http://10.244.0.5:9090/metrics"},
	} {
		// The ready endpoint, every time: the other is not ready.
		for range 5 {
			code, body := env.do(t, "GET", tt.path, nil)
			if got := pods.last(); code != http.StatusOK || got.url != tt.url {
				t.Fatalf("GET %s: %d %q; the pod got %s, want %s", tt.path, code, body, got.url, tt.url)
			}
		}
	}
	if a := authz.last(); a.GetResource() != "services" || a.GetSubresource() != "proxy" || a.GetVerb() != "get" || a.GetName() != "web:metrics" {
		t.Errorf("authorized as %s %s/%s %s", a.GetVerb(), a.GetResource(), a.GetSubresource(), a.GetName())
	}
}

func TestServiceProxyNoEndpoint(t *testing.T) {
	env, pods, _ := newPodProxyEnv(t)
	cs := env.clientset(t)
	ctx := testCtx(t)
	for _, name := range []string{"empty", "unready", "forged", "orphan", "elsewhere"} {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ServiceSpec{
			Ports: []corev1.ServicePort{{Port: 80}}}}
		if _, err := cs.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	port := []discoveryv1.EndpointPort{{Name: ptr.To(""), Port: ptr.To[int32](80)}}
	createSlice(t, env, "unready", port, endpoint("10.244.0.5", "server", false))
	// An endpoint whose address is not its pod's: nothing but pods' own
	// addresses is ever dialled, whatever an EndpointSlice says.
	createSlice(t, env, "forged", port, endpoint("10.244.0.6", "local", true), endpoint("10.244.9.9", "server", true))
	createSlice(t, env, "orphan", port, endpoint("10.244.0.5", "", true))
	elsewhere := endpoint("10.244.0.5", "server", true)
	elsewhere.TargetRef.Namespace = "kube-system"
	createSlice(t, env, "elsewhere", port, elsewhere)

	before := len(pods.reqs)
	const base = "/api/v1/namespaces/default/services/"
	for _, tt := range []struct {
		path string
		code int
		msg  string
	}{
		{base + "empty/proxy/", 503, `no endpoints available for service "empty"`},
		{base + "unready/proxy/", 503, `no endpoints available for service "unready"`},
		{base + "forged:80/proxy/", 503, `no endpoints available for service "forged"`},
		{base + "orphan/proxy/", 503, `no endpoints available for service "orphan"`},
		{base + "elsewhere/proxy/", 503, `no endpoints available for service "elsewhere"`},
		{base + "nosuch/proxy/", 503, `no endpoints available for service "nosuch"`},
		{base + "nosuch:80/proxy/", 404, `services "nosuch" not found`},
		{base + "web:81/proxy/", 503, `no service port 81 found for service "web"`},
		{base + "web:nosuch/proxy/", 503, `no endpoints available for service "web"`},
		{base + "ftp:web:80/proxy/", 400, `invalid service request "ftp:web:80"`},
	} {
		code, body := env.do(t, "GET", tt.path, nil)
		if code != tt.code || !strings.Contains(statusMessage(body), tt.msg) {
			t.Errorf("GET %s: %d %q, want %d %q", tt.path, code, statusMessage(body), tt.code, tt.msg)
		}
	}
	if n := len(pods.reqs) - before; n != 0 {
		t.Errorf("refused requests reached pods %d times: %+v", n, pods.reqs[before:])
	}
}

func TestNodeProxyAuthorizedAsProxy(t *testing.T) {
	env, _, authz := newPodProxyEnv(t)
	if code, body := env.do(t, "GET", "/api/v1/nodes/node-1/proxy/stats/summary", nil); code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	// As upstream's RequestInfoFactory: the path is not the subresource.
	if a := authz.last(); a.GetResource() != "nodes" || a.GetSubresource() != "proxy" || a.GetName() != "node-1" {
		t.Errorf("authorized as %s/%s %s", a.GetResource(), a.GetSubresource(), a.GetName())
	}
}
