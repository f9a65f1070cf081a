package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/hosttools"
	"github.com/nodelet/nodelet/lab"
	"github.com/nodelet/nodelet/test/testkit"
)

// echoManifest: busybox httpd pods answering with their hostname, ready
// while /www/ready.html exists, and a busybox client pod.
const echoManifest = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: echo}
spec:
  replicas: 3
  selector: {matchLabels: {app: echo}}
  template:
    metadata: {labels: {app: echo}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: httpd
        image: busybox:1.36
        command: ["sh", "-c", "mkdir -p /www && hostname > /www/index.html && touch /www/ready.html && exec httpd -f -p 8080 -h /www"]
        ports: [{name: http, containerPort: 8080}]
        readinessProbe:
          httpGet: {path: /ready.html, port: http}
          periodSeconds: 1
          failureThreshold: 1
---
apiVersion: v1
kind: Pod
metadata: {name: client}
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: c
    image: busybox:1.36
    command: ["sleep", "3600"]
`

// soloService selects the one pod labelled solo=yes: a pod reaching it
// through the service reaches itself (hairpin).
const soloService = `
apiVersion: v1
kind: Service
metadata: {name: solo}
spec:
  selector: {solo: "yes"}
  ports: [{port: 80, targetPort: 8080}]
`

// TestServicesOnRealNode: the nodelet's Service proxy on a real node with
// the real kubectl. ClusterIP from a pod and from the node, spread over
// the endpoints, NodePort on the node's address, readiness removing an
// endpoint, hairpin, scale to 0 refused at once and back, rules kept
// across a nodelet crash, and `nodelet cleanup-network` removing them.
func TestServicesOnRealNode(t *testing.T) {
	cp := startControlPlane(t, t.TempDir(), freePort(t))
	node := startRealNode(t, cp, "node-svc")
	testkit.Eventually(t, 60*time.Second, "node Ready", func() bool {
		out, _, _ := cp.kubectl("get", "node", node.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True"
	})
	cp.mustStdin(echoManifest, "apply", "-f", "-")
	cp.must("apply", "-f", "testdata/nginx-deployment.yaml")
	cp.must("rollout", "status", "deployment/echo", "--timeout=120s")
	cp.must("rollout", "status", "deployment/nginx-deployment", "--timeout=120s")
	cp.must("wait", "--for=condition=Ready", "pod/client", "--timeout=60s")

	// nginx through `kubectl expose`, from a busybox pod, by IP.
	cp.must("expose", "deployment", "nginx-deployment", "--port", "80")
	nginxIP := cp.must("get", "service", "nginx-deployment", "-o", "jsonpath={.spec.clusterIP}")
	testkit.Eventually(t, 30*time.Second, "nginx through its ClusterIP from a pod", func() bool {
		out, _, err := cp.kubectl("exec", "client", "--", "wget", "-qO-", "http://"+nginxIP+"/")
		return err == nil && strings.Contains(out, "nginx")
	})
	// And by name, through the node's cluster DNS (the pod's search path,
	// then the full name).
	for _, name := range []string{"nginx-deployment", "nginx-deployment.default.svc.cluster.local"} {
		testkit.Eventually(t, 30*time.Second, "nginx by the name "+name, func() bool {
			out, _, err := cp.kubectl("exec", "client", "--", "wget", "-qO-", "http://"+name+"/")
			return err == nil && strings.Contains(out, "nginx")
		})
	}

	cp.must("expose", "deployment", "echo", "--port", "80", "--target-port", "8080", "--type", "NodePort")
	ip := cp.must("get", "service", "echo", "-o", "jsonpath={.spec.clusterIP}")
	nodePort := cp.must("get", "service", "echo", "-o", "jsonpath={.spec.ports[0].nodePort}")
	pods := runningPodNames(t, cp, "app=echo", 3)
	url := "http://" + ip + "/"

	// Spread: 30 requests from the client pod reach every endpoint.
	var seen map[string]int
	testkit.Eventually(t, 30*time.Second, "requests through the ClusterIP reaching all 3 pods", func() bool {
		seen = hostnamesFromPod(t, cp, "client", url, 30)
		return len(seen) == 3
	})
	for _, p := range pods {
		if seen[p] == 0 {
			t.Fatalf("pod %s never answered through the ClusterIP: %v", p, seen)
		}
	}

	// From the node itself (output path) and on the NodePort.
	for _, u := range []string{url, "http://" + node.ip + ":" + nodePort + "/"} {
		out, err := node.httpGet(u)
		if err != nil || !slices.Contains(pods, strings.TrimSpace(out)) {
			t.Fatalf("GET %s from the node: %v: %q", u, err, out)
		}
	}

	// Readiness: the unready pod leaves the rules, and comes back.
	victim := pods[0]
	victimIP := cp.must("get", "pod", victim, "-o", "jsonpath={.status.podIP}")
	cp.must("exec", victim, "--", "rm", "/www/ready.html")
	testkit.Eventually(t, 20*time.Second, "the unready pod's endpoint to leave the rules", func() bool {
		out, err := node.inNetns(context.Background(), "nft", "list", "table", "ip", "nodelet-services")
		return err == nil && !strings.Contains(out, "dnat to "+victimIP+":") && strings.Contains(out, "dnat to ")
	})
	if got := hostnamesFromPod(t, cp, "client", url, 20); got[victim] != 0 || len(got) != 2 {
		t.Fatalf("with %s unready, answers came from %v", victim, got)
	}
	cp.must("exec", victim, "--", "touch", "/www/ready.html")
	testkit.Eventually(t, 20*time.Second, "the pod's endpoint back in the rules", func() bool {
		out, _ := node.inNetns(context.Background(), "nft", "list", "table", "ip", "nodelet-services")
		return strings.Contains(out, "dnat to "+victimIP+":8080")
	})

	// Hairpin: a pod reaching itself through a service.
	cp.must("label", "pod", victim, "solo=yes")
	cp.mustStdin(soloService, "apply", "-f", "-")
	soloIP := cp.must("get", "service", "solo", "-o", "jsonpath={.spec.clusterIP}")
	testkit.Eventually(t, 30*time.Second, "the pod reaching itself through its service", func() bool {
		got := hostnamesFromPod(t, cp, victim, "http://"+soloIP+"/", 3)
		return got[victim] == 3
	})

	// A nodelet crash leaves the rules in place: the service answers
	// while the nodelet is down, and after its restart.
	node.kill()
	if out, err := node.httpGet(url); err != nil || !slices.Contains(pods, strings.TrimSpace(out)) {
		t.Fatalf("ClusterIP with the nodelet down: %v: %q", err, out)
	}
	node.start()

	// Scale to 0: refused within a second of the endpoints going.
	cp.must("scale", "deployment/echo", "--replicas=0")
	testkit.Eventually(t, 60*time.Second, "the echo endpoints to go", func() bool {
		out, _, err := cp.kubectl("get", "endpointslices", "-l", "kubernetes.io/service-name=echo", "-o", "jsonpath={.items[*].endpoints[*].addresses[0]}")
		return err == nil && strings.TrimSpace(out) == ""
	})
	// Each dial is a new connection (a new conntrack entry), so it meets
	// the rules of the moment; a dial DNATed to a pod that just went may
	// hang, hence the short timeout.
	gone := time.Now()
	var refusedAfter time.Duration
	testkit.Eventually(t, 5*time.Second, "connection refused by the empty service", func() bool {
		err := node.dial(ip+":80", 300*time.Millisecond)
		refusedAfter = time.Since(gone)
		return errors.Is(err, syscall.ECONNREFUSED)
	})
	t.Logf("refused %v after the endpoint slice emptied", refusedAfter)
	if refusedAfter > time.Second {
		t.Errorf("refusal came %v after the endpoints went, want < 1s", refusedAfter)
	}
	for range 5 {
		start := time.Now()
		if err := node.dial(ip+":80", 2*time.Second); !errors.Is(err, syscall.ECONNREFUSED) || time.Since(start) > 200*time.Millisecond {
			t.Fatalf("dial of the empty service: %v after %v, want connection refused at once", err, time.Since(start))
		}
	}
	if _, errOut, err := cp.kubectl("exec", "client", "--", "wget", "-qO-", url); err == nil || !strings.Contains(errOut, "refused") {
		t.Errorf("wget from a pod to the empty service: %v: %q, want connection refused", err, errOut)
	}
	cp.must("scale", "deployment/echo", "--replicas=3")
	cp.must("rollout", "status", "deployment/echo", "--timeout=120s")
	testkit.Eventually(t, 30*time.Second, "the service answering again", func() bool {
		return len(hostnamesFromPod(t, cp, "client", url, 5)) > 0
	})

	// Clean up the workload; a clean stop keeps the rules (a restart must
	// not break connections), `nodelet cleanup-network` removes them.
	cp.must("delete", "service", "echo", "solo", "nginx-deployment")
	cp.must("delete", "deployment", "echo", "nginx-deployment")
	cp.must("delete", "pod", "client", "--grace-period=0", "--force")
	testkit.Eventually(t, 90*time.Second, "no pods", func() bool {
		out, _, _ := cp.kubectl("get", "pods", "-o", "name")
		return strings.TrimSpace(out) == ""
	})
	waitNoLeftovers(t, node)
	node.stop()
	if out, _ := node.inNetns(context.Background(), "nft", "list", "tables"); !strings.Contains(out, "nodelet-services") {
		t.Errorf("the services table is gone after a clean stop (want it kept until cleanup-network): %q", out)
	}
	if out, err := node.inNetns(context.Background(), filepath.Join(binDir, "nodelet"), "cleanup-network"); err != nil {
		t.Fatalf("nodelet cleanup-network: %v: %s", err, out)
	}
	if out, _ := node.inNetns(context.Background(), "nft", "list", "tables"); strings.TrimSpace(out) != "" {
		t.Errorf("nft tables left after cleanup-network: %q", out)
	}
	if out, _ := node.inNetns(context.Background(), "ip", "route", "show", "proto", "158"); strings.TrimSpace(out) != "" {
		t.Errorf("ClusterIP routes left after cleanup-network: %q", out)
	}
}

// hostnamesFromPod fetches url n times from inside pod and counts the
// answers (the echo pods' hostnames) by hostname.
func hostnamesFromPod(t *testing.T, cp *controlPlane, pod, url string, n int) map[string]int {
	t.Helper()
	script := fmt.Sprintf("for i in $(seq %d); do wget -qO- %s; done", n, url)
	out, _, _ := cp.kubectl("exec", pod, "--", "sh", "-c", script)
	got := map[string]int{}
	for _, l := range strings.Fields(out) {
		got[l]++
	}
	return got
}

// runningPodNames waits for want Running pods with the label and returns their
// names, sorted.
func runningPodNames(t *testing.T, cp *controlPlane, selector string, want int) []string {
	t.Helper()
	var names []string
	testkit.Eventually(t, 60*time.Second, fmt.Sprintf("%d pods %s", want, selector), func() bool {
		out, _, err := cp.kubectl("get", "pods", "-l", selector, "--field-selector=status.phase=Running", "-o", "jsonpath={.items[*].metadata.name}")
		names = strings.Fields(out)
		return err == nil && len(names) == want
	})
	sort.Strings(names)
	return names
}

// dial opens (and closes) a TCP connection from inside the node's
// namespace, bounded by timeout.
func (n *realNode) dial(addr string, timeout time.Duration) error {
	return inNetns("/run/netns/"+n.netns, func() error {
		c, err := net.DialTimeout("tcp", addr, timeout)
		if err == nil {
			c.Close()
		}
		return err
	})
}

// TestServicesAcrossNodes: with two lab nodes, a ClusterIP spreads over
// pods on both and a pod's traffic reaches the other node's pods with the
// pod's own address; a NodePort reached from outside the cluster (the lab
// namespace) forwards to the other node's pods, masqueraded to the node's
// address so the replies come back; and pods reach the API server through
// the default kubernetes Service (its endpoint is the advertise address).
func TestServicesAcrossNodes(t *testing.T) {
	e := startLab(t, 2)
	cs := e.cp.clientset()
	e.cp.mustStdin(spreadDeployment, "apply", "-f", "-")
	e.cp.mustStdin(clientPod("client", "node1", false), "apply", "-f", "-")
	e.cp.must("rollout", "status", "deployment/spread", "--timeout=180s")
	e.cp.must("wait", "--for=condition=Ready", "pod/client", "--timeout=120s")
	perNode := livePodsByNode(t, cs, "spread")
	if len(perNode["node1"]) == 0 || len(perNode["node2"]) == 0 {
		t.Fatalf("pods per node %v, want some on each", podNames(perNode))
	}
	e.cp.must("expose", "deployment", "spread", "--port", "80", "--type", "NodePort")
	ip := e.cp.must("get", "service", "spread", "-o", "jsonpath={.spec.clusterIP}")
	nodePort := e.cp.must("get", "service", "spread", "-o", "jsonpath={.spec.ports[0].nodePort}")
	clientIP := getPod(t, cs, "client").Status.PodIP
	node1IP := e.node("node1").IP

	logsOf := func(pods []corev1.Pod) string {
		var all strings.Builder
		for _, p := range pods {
			out, _, _ := e.cp.kubectl("logs", p.Name)
			all.WriteString(out)
		}
		return all.String()
	}
	testkit.Eventually(t, 60*time.Second, "the client's requests through the ClusterIP reaching node2's pods from the pod's own address", func() bool {
		out, _, _ := e.cp.kubectl("exec", "client", "--", "sh", "-c", "for i in $(seq 20); do wget -qO- http://"+ip+"/ >/dev/null && echo ok; done")
		return strings.Count(out, "ok") == 20 && strings.Contains(logsOf(perNode["node2"]), clientIP+" - - ")
	})

	t.Logf("ClusterIP %s: 20/20 from the client pod, node2's pods saw the pod's address %s", ip, clientIP)
	// By name: node1's cluster DNS knows the Service too.
	if out, errOut, err := e.cp.kubectl("exec", "client", "--", "sh", "-c", "for i in $(seq 10); do wget -qO- http://spread.default.svc.cluster.local/ >/dev/null && echo ok; done"); strings.Count(out, "ok") != 10 {
		t.Fatalf("by name from node1: %v: %q %s", err, out, errOut)
	}

	// From outside: the lab namespace holds no node; node1's NodePort
	// forwards to node2's pods too, from node1's address.
	labNS := "/run/netns/" + e.state.NetNS
	testkit.Eventually(t, 60*time.Second, "NodePort requests from outside reaching node2's pods, masqueraded to node1's address", func() bool {
		for range 10 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			out, err := hosttools.CommandContext(ctx, "nsenter", "--net="+labNS, "busybox", "wget", "-q", "-O-", "http://"+node1IP+":"+nodePort+"/").CombinedOutput()
			cancel()
			if err != nil || !strings.Contains(string(out), "Welcome to nginx") {
				t.Fatalf("NodePort %s:%s from the lab namespace: %v: %s", node1IP, nodePort, err, out)
			}
		}
		return strings.Contains(logsOf(perNode["node2"]), node1IP+" - - ")
	})

	t.Logf("NodePort %s:%s from the lab namespace: node2's pods saw node1's address", node1IP, nodePort)

	// The API server through the kubernetes Service.
	kube := e.cp.must("get", "service", "kubernetes", "-o", "jsonpath={.spec.clusterIP}")
	if ep := e.cp.must("get", "endpointslice", "kubernetes", "-o", "jsonpath={.endpoints[*].addresses[*]}"); ep != lab.ControlPlaneIP {
		t.Fatalf("default/kubernetes endpoints %q, want the advertise address %s", ep, lab.ControlPlaneIP)
	}
	if out, errOut, err := e.cp.kubectl("exec", "client", "--", "sh", "-c", "echo | nc -w 3 "+kube+" 443 && echo connected"); err != nil || !strings.Contains(out, "connected") {
		t.Fatalf("pod -> kubernetes Service %s:443: %v: %s %s", kube, err, out, errOut)
	}
	t.Logf("pod -> kubernetes Service %s:443 -> %s connected", kube, lab.ControlPlaneIP)
	testInClusterClient(t, e)

	// No pods left for the lab's down (their loggers end with them).
	e.cp.must("delete", "service", "spread")
	e.cp.must("delete", "deployment", "spread")
	e.cp.must("delete", "pod", "client", "--grace-period=0", "--force")
	testkit.Eventually(t, 90*time.Second, "no pods", func() bool {
		out, _, _ := e.cp.kubectl("get", "pods", "-o", "name")
		return strings.TrimSpace(out) == ""
	})
}
