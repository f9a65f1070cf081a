package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodelet/nodelet/lab"
	"github.com/nodelet/nodelet/network"
	"github.com/nodelet/nodelet/test/testkit"
)

const spreadDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: spread
spec:
  replicas: 6
  selector:
    matchLabels: {app: spread}
  template:
    metadata:
      labels: {app: spread}
    spec:
      terminationGracePeriodSeconds: 2
      topologySpreadConstraints:
      - maxSkew: 1
        topologyKey: kubernetes.io/hostname
        whenUnsatisfiable: DoNotSchedule
        labelSelector:
          matchLabels: {app: spread}
      containers:
      - name: nginx
        image: docker.io/library/nginx:1.22
`

// everyDaemonSet is a busybox DaemonSet: one pod on every node.
const everyDaemonSet = `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: every
spec:
  selector:
    matchLabels: {app: every}
  template:
    metadata:
      labels: {app: every}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: box
        image: docker.io/library/busybox:1.36
        command: [sleep, "3600"]
`

// TestSeveralNodes runs the lab with three nodes: a Deployment spreads
// over them, a DaemonSet runs one pod on each (on a fourth node added
// later until it leaves, and again on a node that returns from a failure),
// pods reach each other across nodes by pod IP with their own
// source address, traffic leaving the cluster is masqueraded, a second
// nodelet on a node's root dir is refused, and a node that dies has its
// pods replaced elsewhere and, when it returns, cleans up what was
// removed while it was away.
func TestSeveralNodes(t *testing.T) {
	e := startLab(t, 3, "--node-monitor-grace-period=10s",
		"--default-unreachable-toleration-seconds=5", "--default-not-ready-toleration-seconds=5")
	cs := e.cp.clientset()
	e.cp.mustStdin(spreadDeployment, "apply", "-f", "-")
	e.cp.mustStdin(everyDaemonSet, "apply", "-f", "-")
	e.cp.mustStdin(clientPod("client", "node1", false), "apply", "-f", "-")
	e.cp.mustStdin(clientPod("survivor", "node3", true), "apply", "-f", "-")
	e.cp.must("rollout", "status", "deployment/spread", "--timeout=180s")
	e.cp.must("wait", "--for=condition=Ready", "pod/client", "pod/survivor", "--timeout=120s")

	perNode := livePodsByNode(t, cs, "spread")
	for _, n := range []string{"node1", "node2", "node3"} {
		if len(perNode[n]) != 2 {
			t.Fatalf("topology spread: pods per node %v, want 2 on each", podNames(perNode))
		}
	}
	t.Run("daemonset on every node", func(t *testing.T) { waitDaemonOnEveryNode(t, cs, "") })
	t.Run("routes", func(t *testing.T) { testPeerRoutes(t, e, cs) })
	t.Run("cross-node pod traffic", func(t *testing.T) { testCrossNode(t, e, cs, perNode) })
	t.Run("egress masquerade", func(t *testing.T) { testEgressMasquerade(t, e, cs) })
	t.Run("second nodelet refused", func(t *testing.T) { testSecondNodelet(t, e, cs) })
	t.Run("daemonset on a node added and removed", func(t *testing.T) { testDaemonSetNewNode(t, e, cs) })
	t.Run("node failure and return", func(t *testing.T) { testNodeFailure(t, e, cs, perNode["node3"]) })
}

// waitDaemonOnEveryNode waits until the every DaemonSet has exactly one
// pod on each of the three nodes (and none elsewhere), each Running and
// Ready, and its status counts three ready of three desired. If
// returned names a node that came back from a failure, its pod must be
// Ready after the node's last transition to Ready.
func waitDaemonOnEveryNode(t testing.TB, cs kubernetes.Interface, returned string) map[string][]corev1.Pod {
	t.Helper()
	return waitDaemonOnNodes(t, cs, []string{"node1", "node2", "node3"}, returned)
}

// waitDaemonOnNodes is waitDaemonOnEveryNode for the lab's nodes, the
// nodes it has now; it returns the DaemonSet's pods by node.
func waitDaemonOnNodes(t testing.TB, cs kubernetes.Interface, nodes []string, returned string) map[string][]corev1.Pod {
	t.Helper()
	var last string
	deadline := time.Now().Add(2 * time.Minute)
	for {
		last = ""
		perNode := livePodsByNode(t, cs, "every")
		for _, n := range nodes {
			pods := perNode[n]
			switch {
			case len(pods) != 1:
				last += fmt.Sprintf("%s has %d pods; ", n, len(pods))
			case pods[0].Status.Phase != corev1.PodRunning || !podReady(&pods[0]):
				last += fmt.Sprintf("%s's %s is %s (ready %v); ", n, pods[0].Name, pods[0].Status.Phase, podReady(&pods[0]))
			case n == returned && !readyAfterNode(t, cs, &pods[0], n):
				last += fmt.Sprintf("%s's %s not Ready since the node returned; ", n, pods[0].Name)
			}
		}
		if len(perNode) != len(nodes) {
			last += fmt.Sprintf("pods on %d nodes: %v; ", len(perNode), podNames(perNode))
		}
		if last == "" {
			ds, err := cs.AppsV1().DaemonSets("default").Get(context.Background(), "every", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			st, want := ds.Status, int32(len(nodes))
			if st.DesiredNumberScheduled == want && st.CurrentNumberScheduled == want && st.NumberReady == want && st.NumberMisscheduled == 0 {
				t.Logf("daemonset every: %v", podNames(perNode))
				return perNode
			}
			last = fmt.Sprintf("status desired %d current %d ready %d misscheduled %d",
				st.DesiredNumberScheduled, st.CurrentNumberScheduled, st.NumberReady, st.NumberMisscheduled)
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemonset every, one Ready pod per node: %s", last)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// readyAfterNode: the pod's Ready condition last turned True no earlier than
// node's Ready condition did.
func readyAfterNode(t testing.TB, cs kubernetes.Interface, p *corev1.Pod, node string) bool {
	n, err := cs.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			for _, pc := range p.Status.Conditions {
				if pc.Type == corev1.PodReady {
					return !pc.LastTransitionTime.Before(&c.LastTransitionTime)
				}
			}
		}
	}
	return false
}

// clientPod is a busybox pod pinned to node; a survivor tolerates its
// node's failure for ever, so it stays bound through an outage.
func clientPod(name, node string, survivor bool) string {
	tol := ""
	if survivor {
		tol = `
  tolerations:
  - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute}
  - {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute}`
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  nodeSelector: {kubernetes.io/hostname: %s}
  terminationGracePeriodSeconds: 1%s
  containers:
  - name: box
    image: docker.io/library/busybox:1.36
    command: [sleep, "3600"]
`, name, node, tol)
}

// livePodsByNode are the live (not deleting) pods in default labelled
// app=APP, by node.
func livePodsByNode(t testing.TB, cs kubernetes.Interface, app string) map[string][]corev1.Pod {
	t.Helper()
	list, err := cs.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]corev1.Pod{}
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out[p.Spec.NodeName] = append(out[p.Spec.NodeName], p)
		}
	}
	return out
}

func podNames(m map[string][]corev1.Pod) map[string][]string {
	out := map[string][]string{}
	for n, pods := range m {
		for _, p := range pods {
			out[n] = append(out[n], p.Name)
		}
	}
	return out
}

func getPod(t testing.TB, cs kubernetes.Interface, name string) *corev1.Pod {
	t.Helper()
	p, err := cs.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// testPeerRoutes: each node routes the other nodes' pod CIDRs through
// their addresses, marked as the nodelet's.
func testPeerRoutes(t *testing.T, e *labEnv, cs kubernetes.Interface) {
	nodes, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, self := range nodes.Items {
		out, err := e.inNode(self.Name, "ip", "-4", "route", "show", "proto", fmt.Sprint(int(network.RouteProtocol)))
		if err != nil {
			t.Fatalf("ip route in %s: %v\n%s", self.Name, err, out)
		}
		for _, peer := range nodes.Items {
			want := fmt.Sprintf("%s via %s", peer.Spec.PodCIDR, e.node(peer.Name).IP)
			if has := strings.Contains(out, want); has != (peer.Name != self.Name) {
				t.Errorf("routes of %s (want a route %q: %v):\n%s", self.Name, want, peer.Name != self.Name, out)
			}
		}
		if ip := internalIP(&self); ip != e.node(self.Name).IP {
			t.Errorf("%s InternalIP %s, want %s (the address that routes to the control plane)", self.Name, ip, e.node(self.Name).IP)
		}
	}
}

func internalIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

// testCrossNode: the client on node1 fetches nginx on nodes 2 and 3 by pod
// IP, and nginx logs the client's own pod IP (no masquerade in between).
func testCrossNode(t *testing.T, e *labEnv, cs kubernetes.Interface, perNode map[string][]corev1.Pod) {
	clientIP := getPod(t, cs, "client").Status.PodIP
	for _, node := range []string{"node2", "node3"} {
		for _, p := range perNode[node] {
			out, errOut, err := e.cp.kubectl("exec", "client", "--", "wget", "-q", "-O-", "http://"+p.Status.PodIP+"/")
			if err != nil || !strings.Contains(out, "Welcome to nginx") {
				t.Errorf("client on node1 -> %s on %s (%s): %v %s\n%s", p.Name, node, p.Status.PodIP, err, errOut, out)
				continue
			}
			testkit.Eventually(t, 10*time.Second, "nginx access log of "+p.Name, func() bool {
				logs, _, _ := e.cp.kubectl("logs", p.Name)
				return strings.Contains(logs, clientIP+" - - ")
			})
		}
	}
}

// testEgressMasquerade: a connection from a pod to an address outside the
// cluster (the lab namespace's, where no node lives) arrives from the
// node's address.
func testEgressMasquerade(t *testing.T, e *labEnv, cs kubernetes.Interface) {
	ln, err := listenInNetns("/run/netns/"+e.state.NetNS, lab.ControlPlaneIP+":0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var from []string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		mu.Lock()
		from = append(from, host)
		mu.Unlock()
		fmt.Fprint(w, "seen")
	})}
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/"
	if out, errOut, err := e.cp.kubectl("exec", "client", "--", "wget", "-q", "-O-", url); err != nil || out != "seen" {
		t.Fatalf("client -> %s: %v %s %s", url, err, out, errOut)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := e.node("node1").IP; !slices.Equal(from, []string{want}) {
		t.Errorf("the outside saw the pod's traffic from %v, want the node's address %s", from, want)
	}
}

// testSecondNodelet starts node1's nodelet command line a second time: it
// must exit with the lock error naming the running one and change nothing.
func testSecondNodelet(t *testing.T, e *labEnv, cs kubernetes.Interface) {
	n := e.node("node1")
	before := containerIDs(t, cs, "node1")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, n.NodeletArgs[0], n.NodeletArgs[1:]...).CombinedOutput()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("second nodelet on node1's root dir: err %v (ctx %v)\n%s", err, ctx.Err(), out)
	}
	if msg := string(out); !strings.Contains(msg, "another nodelet is running") || !strings.Contains(msg, fmt.Sprintf("pid=%d", n.NodeletPID)) {
		t.Errorf("second nodelet's error does not name the running one (pid %d):\n%s", n.NodeletPID, out)
	}
	if err := syscall.Kill(n.NodeletPID, 0); err != nil {
		t.Errorf("the first nodelet (pid %d) is gone: %v", n.NodeletPID, err)
	}
	time.Sleep(3 * time.Second) // a disturbance would show in the next sync
	if after := containerIDs(t, cs, "node1"); !slices.Equal(before, after) {
		t.Errorf("node1's containers changed: %v -> %v", before, after)
	}
	if s := e.readyStatus("node1"); s != "True" {
		t.Errorf("node1 Ready=%s after the refused start", s)
	}
}

// containerIDs are the container IDs and restart counts of node's pods.
func containerIDs(t testing.TB, cs kubernetes.Interface, node string) []string {
	t.Helper()
	list, err := cs.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range list.Items {
		for _, c := range p.Status.ContainerStatuses {
			out = append(out, fmt.Sprintf("%s/%s %s %d", p.Name, c.Name, c.ContainerID, c.RestartCount))
		}
	}
	slices.Sort(out)
	return out
}
