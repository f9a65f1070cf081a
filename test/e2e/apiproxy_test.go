package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/websocket"
	"k8s.io/client-go/rest"

	"github.com/nodelet/nodelet/hosttools"
	"github.com/nodelet/nodelet/test/testkit"
)

// apiProxyManifest: nginx behind a Service whose port differs from the
// container's, a busybox pod with no port and a line in its log, and a
// pod no node can take (it never has an IP).
const apiProxyManifest = `
apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: nginx
    image: nginx:1.22
    ports: [{name: http, containerPort: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{name: http, port: 8080, targetPort: http}]
---
apiVersion: v1
kind: Pod
metadata: {name: quiet}
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: c
    image: busybox:1.36
    command: ["sh", "-c", "echo hello-over-websocket; exec sleep 3600"]
---
apiVersion: v1
kind: Pod
metadata: {name: nowhere}
spec:
  nodeSelector: {no-such-label: "true"}
  containers:
  - name: c
    image: busybox:1.36
`

// TestAPIProxyOnRealNode: pods/proxy and services/proxy reach nginx on a
// real node through the real kubectl, the refusals are upstream's
// Statuses, and pods/log streams over a WebSocket.
func TestAPIProxyOnRealNode(t *testing.T) {
	// The pods' addresses come from a CIDR no host route covers, and the
	// host routes it to the node (as a cluster network would), so the API
	// server can dial the pods as kube-apiserver does.
	podCIDR := freeCIDR(t, "10.201")
	cp := startControlPlane(t, t.TempDir(), freePort(t), "--cluster-cidr", podCIDR, "--node-cidr-mask-size", "24")
	node := startRealNode(t, cp, "node-apiproxy")
	testkit.Eventually(t, 60*time.Second, "node Ready", func() bool {
		out, _, _ := cp.kubectl("get", "node", node.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True"
	})
	if got := cp.must("get", "node", node.name, "-o", "jsonpath={.spec.podCIDR}"); got != podCIDR {
		t.Fatalf("node pod CIDR %q, want %q", got, podCIDR)
	}
	routePodsThrough(t, node, podCIDR)

	cp.mustStdin(apiProxyManifest, "apply", "-f", "-")
	cp.must("wait", "--for=condition=Ready", "pod/web", "pod/quiet", "--timeout=120s")

	const pods, services = "/api/v1/namespaces/default/pods/", "/api/v1/namespaces/default/services/"
	for _, path := range []string{pods + "web:80/proxy/", pods + "web/proxy/", pods + "http:web:http/proxy/index.html"} {
		if out := cp.must("get", "--raw", path); !strings.Contains(out, "Welcome to nginx") {
			t.Fatalf("GET %s: %q", path, out)
		}
	}
	// The endpoint controller publishes the ready pod.
	testkit.Eventually(t, 60*time.Second, "services/proxy to reach nginx", func() bool {
		out, _, err := cp.kubectl("get", "--raw", services+"web:8080/proxy/")
		return err == nil && strings.Contains(out, "Welcome to nginx")
	})
	if out := cp.must("get", "--raw", services+"web:http/proxy/"); !strings.Contains(out, "Welcome to nginx") {
		t.Fatalf("services/proxy by port name: %q", out)
	}

	for _, tt := range []struct{ path, want string }{
		// No container port: the scheme's own (80), where nothing listens.
		{pods + "quiet/proxy/", "error trying to reach service"},
		{pods + "quiet:8080/proxy/", "connection refused"},
		{pods + "nowhere:80/proxy/", "address not allowed"},
		{pods + "nosuch:80/proxy/", `pods "nosuch" not found`},
		{services + "web:9999/proxy/", `no service port 9999 found for service "web"`},
		{services + "nosuch/proxy/", `no endpoints available for service "nosuch"`},
	} {
		out, errOut, err := cp.kubectl("get", "--raw", tt.path)
		if err == nil || !strings.Contains(errOut, tt.want) {
			t.Errorf("GET %s: want an error %q, got %v: %s%s", tt.path, tt.want, err, out, errOut)
		}
	}

	if got := podLogOverWebSocket(t, cp, "quiet"); !strings.Contains(got, "hello-over-websocket\n") {
		t.Errorf("pods/log over websocket: %q", got)
	}

	cp.must("delete", "pods", "--all", "--grace-period=0", "--wait=false")
	testkit.Eventually(t, 90*time.Second, "no pods", func() bool {
		out, _, _ := cp.kubectl("get", "pods", "-o", "name")
		return strings.TrimSpace(out) == ""
	})
	waitNoLeftovers(t, node)
}

// freeCIDR picks a PREFIX.X.0/24 that no host route but the default
// covers (tests may run while another test's routes exist).
func freeCIDR(t testing.TB, prefix string) string {
	t.Helper()
	start := time.Now().Nanosecond()
	for i := range 250 {
		subnet := fmt.Sprintf("%s.%d", prefix, 1+(start+i)%250)
		out, err := hosttools.Command("ip", "route", "show", "match", subnet+".1").Output()
		if err != nil {
			t.Fatalf("ip route show match %s.1: %v", subnet, err)
		}
		covered := false
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			covered = covered || line != "" && !strings.HasPrefix(line, "default")
		}
		if !covered {
			return subnet + ".0/24"
		}
	}
	t.Fatalf("no free %s.X.0/24", prefix)
	return ""
}

// routePodsThrough sends the host's traffic for podCIDR to the node's
// namespace, which forwards it to its pods' bridge, until the test ends.
func routePodsThrough(t testing.TB, node *realNode, podCIDR string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out, err := node.inNetns(ctx, "busybox", "sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward"); err != nil {
		t.Fatalf("enable forwarding in the node's namespace: %v: %s", err, out)
	}
	mustIP(t, "route", "add", podCIDR, "via", node.ip)
	t.Cleanup(func() { hosttools.Command("ip", "route", "del", podCIDR, "via", node.ip).Run() })
}

// podLogOverWebSocket reads a pod's log as a browser-side client would:
// a WebSocket with the base64.binary.k8s.io protocol.
func podLogOverWebSocket(t *testing.T, cp *controlPlane, pod string) string {
	t.Helper()
	cfg := cp.restConfig()
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(cfg.Host, "https://")
	wsCfg, err := websocket.NewConfig("wss://"+host+"/api/v1/namespaces/default/pods/"+pod+"/log", cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	wsCfg.TlsConfig, wsCfg.Protocol = tlsConfig, []string{"base64.binary.k8s.io"}
	if cfg.BearerToken != "" {
		wsCfg.Header.Set("Authorization", "Bearer "+cfg.BearerToken)
	}
	ws, err := websocket.DialConfig(wsCfg)
	if err != nil {
		t.Fatalf("dial pods/log websocket: %v", err)
	}
	defer ws.Close()
	ws.SetDeadline(time.Now().Add(30 * time.Second))
	if p := ws.Config().Protocol; len(p) != 1 || p[0] != "base64.binary.k8s.io" {
		t.Fatalf("negotiated protocol %v", p)
	}
	var log strings.Builder
	for {
		var msg string
		if err := websocket.Message.Receive(ws, &msg); err == io.EOF {
			return log.String()
		} else if err != nil {
			t.Fatalf("pods/log websocket: %v (so far %q)", err, log.String())
		}
		chunk, err := base64.StdEncoding.DecodeString(msg)
		if err != nil {
			t.Fatalf("pods/log websocket: message %q is not base64: %v", msg, err)
		}
		log.Write(chunk)
	}
}
