package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/hosttools"
	"github.com/nodelet/nodelet/test/images"
	"github.com/nodelet/nodelet/test/testkit"
)

// metricsServerManifest is metrics-server's components.yaml (testdata),
// without its APIService unless withAPIService: without it metrics-server
// runs and scrapes, but metrics.k8s.io stays the control plane's own.
func metricsServerManifest(t testing.TB, withAPIService bool) string {
	t.Helper()
	b, err := os.ReadFile("testdata/metrics-server.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if withAPIService {
		return string(b)
	}
	var docs []string
	for _, doc := range strings.Split(string(b), "\n---\n") {
		if !strings.Contains(doc, "\nkind: APIService\n") {
			docs = append(docs, doc)
		}
	}
	return strings.Join(docs, "\n---\n")
}

// startMetricsServerCluster starts a control plane and a real node whose
// pods reach the API server with in-cluster configuration (as
// startInClusterNode) and whose nodelet runs as itself, system:node:NAME
// in system:nodes (not as the admin), so that the TokenReviews and
// SubjectAccessReviews its API asks are the node's own, as on installed
// nodes. The node has busybox and metrics-server's image. With podCIDR,
// the node's pods get addresses from it and the host routes it to the
// node, so that the API server reaches them (the aggregation layer's
// proxy to metrics-server's endpoints).
func startMetricsServerCluster(t *testing.T, name, podCIDR string) (*controlPlane, *realNode) {
	t.Helper()
	imageDir := t.TempDir()
	if _, _, err := images.Busybox(imageDir); err != nil {
		t.Fatal(err)
	}
	if _, err := images.MetricsServerImage(imageDir, images.CacheDir()); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	cpArgs := []string{"--advertise-address", inClusterAPIAddr}
	if podCIDR != "" {
		cpArgs = append(cpArgs, "--cluster-cidr", podCIDR, "--node-cidr-mask-size", "24")
	}
	cp := startControlPlane(t, t.TempDir(), port, cpArgs...)
	kc, err := exec.Command(filepath.Join(binDir, "controlplane"), "kubeconfig", "--data-dir", cp.dataDir,
		"--user", "system:node:"+name, "--group", "system:nodes", "--server", fmt.Sprintf("https://127.0.0.1:%d", port)).Output()
	if err != nil {
		t.Fatalf("controlplane kubeconfig for the node: %v", err)
	}
	nodeKubeconfig := filepath.Join(t.TempDir(), "node.kubeconfig")
	if err := os.WriteFile(nodeKubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	// The flags' last values win.
	node := startRealNode(t, cp, name, "--image-dir", imageDir, "--kubeconfig", nodeKubeconfig)
	if out, err := hosttools.Command("ip", "-n", node.netns, "addr", "add", inClusterAPIAddr+"/32", "dev", "lo").CombinedOutput(); err != nil {
		t.Fatalf("ip addr add %s in %s: %v: %s", inClusterAPIAddr, node.netns, err, out)
	}
	forwardIntoNetnsTo(t, "/run/netns/"+node.netns, fmt.Sprintf("%s:%d", inClusterAPIAddr, port), fmt.Sprintf("127.0.0.1:%d", port))
	testkit.Eventually(t, 60*time.Second, "node Ready", func() bool {
		out, _, _ := cp.kubectl("get", "node", node.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True"
	})
	if podCIDR != "" {
		if got := cp.must("get", "node", node.name, "-o", "jsonpath={.spec.podCIDR}"); got != podCIDR {
			t.Fatalf("node pod CIDR %q, want %q", got, podCIDR)
		}
		routePodsThrough(t, node, podCIDR)
	}
	return cp, node
}

// metricsServerLoad is a pod for metrics-server to measure.
const metricsServerLoad = `apiVersion: v1
kind: Pod
metadata:
  name: load
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox:1.36
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "while true; do :; done"]
    resources:
      limits: {cpu: 100m}
`

// scrapeErrors are metrics-server's (v0.8.0, pkg/scraper) log lines about
// a scrape that failed: "Failed to scrape node" with the node's answer
// (e.g. request failed, status: "403 Forbidden"), "Failed to list nodes",
// "Got duplicate node point".
var scrapeErrors = regexp.MustCompile(`(?m)^.*(Failed to scrape node|Failed to list nodes|Got duplicate|request failed, status).*$`)

// klogProblems are the warning and error lines of a klog log.
var klogProblems = regexp.MustCompile(`(?m)^[EW]\d{4} .*$`)

// TestMetricsServerOnNode: the node's API authenticates bearer tokens and
// authorizes them as upstream's kubelet (TokenReview and
// SubjectAccessReview by the API server, asked by the node as itself),
// and metrics-server v0.8.0, built from the module proxy and deployed
// with its own components.yaml, runs on the node, scrapes it with its
// ServiceAccount's token (its readiness needs a stored scrape) without
// an error, and serves the node's and the pod's usage from it.
func TestMetricsServerOnNode(t *testing.T) {
	cp, node := startMetricsServerCluster(t, "node-ms", "")
	t.Cleanup(func() { removeMetricsServer(t, cp, node, metricsServerManifest(t, false)) })
	cp.mustStdin(metricsServerLoad, "apply", "-f", "-")

	// The node's /metrics/resource with ServiceAccount tokens: one whose
	// account may get nodes/metrics (metrics-server's), one whose may not,
	// a token that is not one, none.
	cp.mustStdin(metricsServerManifest(t, false), "apply", "-f", "-")
	cp.must("create", "serviceaccount", "stranger")
	ip := cp.must("get", "node", node.name, "-o", `jsonpath={.status.addresses[?(@.type=="InternalIP")].address}`)
	port := cp.must("get", "node", node.name, "-o", "jsonpath={.status.daemonEndpoints.kubeletEndpoint.Port}")
	resourceURL := "https://" + net.JoinHostPort(ip, port) + "/metrics/resource"
	msToken := strings.TrimSpace(cp.must("-n", "kube-system", "create", "token", "metrics-server"))
	strangerToken := strings.TrimSpace(cp.must("create", "token", "stranger"))
	for _, c := range []struct {
		who, token, code, body string
	}{
		{"metrics-server", msToken, "200", "node_cpu_usage_seconds_total"},
		{"stranger", strangerToken, "403", "Forbidden (user=system:serviceaccount:default:stranger, verb=get, resource=nodes, subresource(s)=[metrics])\n"},
		{"a bad token", "not-a-token", "401", "Unauthorized"},
		{"no credentials", "", "401", "Unauthorized"},
	} {
		code, body := curlNode(t, node, resourceURL, c.token)
		if code != c.code || c.code == "200" && !strings.Contains(body, c.body) || c.code != "200" && body != c.body {
			t.Errorf("/metrics/resource as %s: %s %q, want %s %q", c.who, code, body, c.code, c.body)
		}
	}

	// metrics-server's readiness probe (/readyz) passes only once it
	// stored a scrape of the node.
	waitRolledOut(t, cp, "kube-system", "deployment/metrics-server")
	logs, _, _ := cp.kubectl("-n", "kube-system", "logs", "deployment/metrics-server")
	if bad := scrapeErrors.FindAllString(logs, -1); len(bad) > 0 {
		t.Errorf("metrics-server could not scrape the node:\n%s", strings.Join(bad, "\n"))
	}
	// Its other warnings and errors, for the record.
	t.Logf("metrics-server's warnings and errors:\n%s", summarizeKlog(klogProblems.FindAllString(logs, -1)))

	// metrics-server's own API (not through the aggregation layer): a
	// reader with the aggregated role gets the node's and the pod's usage,
	// metrics-server authenticating and authorizing it by the API server.
	cp.must("create", "serviceaccount", "metrics-reader")
	cp.must("create", "clusterrolebinding", "metrics-reader", "--clusterrole=system:aggregated-metrics-reader", "--serviceaccount=default:metrics-reader")
	readerToken := strings.TrimSpace(cp.must("create", "token", "metrics-reader"))
	podIP := cp.must("-n", "kube-system", "get", "pods", "-l", "k8s-app=metrics-server", "-o", "jsonpath={.items[0].status.podIP}")
	base := "https://" + net.JoinHostPort(podIP, "10250") + "/apis/metrics.k8s.io/v1beta1"
	var nodeMetrics struct {
		Metadata struct{ Name string }
		Window   string
		Usage    map[string]string
	}
	var podMetrics struct {
		Metadata   struct{ Name string }
		Containers []struct {
			Name  string
			Usage map[string]string
		}
	}
	var code, body string
	testkit.Eventually(t, 60*time.Second, "metrics-server to serve the node's and the pod's usage", func() bool {
		code, body = curlNode(t, node, base+"/nodes/"+node.name, readerToken)
		if code != "200" || json.Unmarshal([]byte(body), &nodeMetrics) != nil {
			return false
		}
		code, body = curlNode(t, node, base+"/namespaces/default/pods/load", readerToken)
		return code == "200" && json.Unmarshal([]byte(body), &podMetrics) == nil
	})
	if nodeMetrics.Metadata.Name != node.name || nodeMetrics.Usage["cpu"] == "" || nodeMetrics.Usage["memory"] == "" {
		t.Errorf("NodeMetrics: %+v", nodeMetrics)
	}
	if len(podMetrics.Containers) != 1 || podMetrics.Containers[0].Name != "main" || podMetrics.Containers[0].Usage["cpu"] == "" {
		t.Errorf("PodMetrics: %+v", podMetrics)
	}
	t.Logf("metrics-server: node %s usage %v over %s; pod load %v", node.name, nodeMetrics.Usage, nodeMetrics.Window, podMetrics.Containers)
	if code, body := curlNode(t, node, base+"/nodes", strangerToken); code != "403" {
		t.Errorf("metrics-server's API as an account without the role: %s %.300s", code, body)
	}
}

// removeMetricsServer deletes manifest and the load pod, and waits until
// no pod of any namespace is left and the node holds nothing of them. The
// tests register it as a cleanup, so that it runs however they end,
// before the node stops.
func removeMetricsServer(t *testing.T, cp *controlPlane, node *realNode, manifest string) {
	t.Helper()
	if out, errOut, err := cp.kubectlStdin(manifest, "delete", "-f", "-", "--wait=false", "--ignore-not-found"); err != nil {
		// Deleted already, or a kind not served: what matters is below.
		t.Logf("delete metrics-server: %v\n%s%s", err, out, errOut)
	}
	cp.must("delete", "pod", "load", "--grace-period=0", "--wait=false", "--ignore-not-found")
	testkit.Eventually(t, 120*time.Second, "no pods", func() bool {
		out, _, _ := cp.kubectl("get", "pods", "-A", "-o", "name")
		return strings.TrimSpace(out) == ""
	})
	waitNoLeftovers(t, node)
}

// summarizeKlog lists klog lines once each, without their headers, with
// how many times each came.
func summarizeKlog(lines []string) string {
	var order []string
	count := map[string]int{}
	for _, l := range lines {
		if _, msg, ok := strings.Cut(l, "] "); ok {
			l = l[:1] + " " + msg
		}
		if count[l] == 0 {
			order = append(order, l)
		}
		count[l]++
	}
	var b strings.Builder
	for _, l := range order {
		fmt.Fprintf(&b, "%dx %s\n", count[l], l)
	}
	return b.String()
}

// curlNode sends GET url from inside the node's namespace (as a pod
// would reach it), with token as a bearer token if any, and returns the
// status code and body.
func curlNode(t *testing.T, node *realNode, url, token string) (code, body string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	args := []string{"curl", "-sk", "-w", "\n%{http_code}"}
	if token != "" {
		args = append(args, "-H", "Authorization: Bearer "+token)
	}
	out, err := node.inNetns(ctx, append(args, url)...)
	if err != nil {
		t.Fatalf("curl %s: %v\n%s", url, err, out)
	}
	// curl -w puts the status code on a line of its own after the body.
	i := strings.LastIndex(out, "\n")
	return strings.TrimSpace(out[i+1:]), out[:max(i, 0)]
}

// TestMetricsServerAggregated: installing metrics-server's components.yaml
// (with its APIService) takes metrics.k8s.io over from the control plane's
// built-in metrics, and kubectl top keeps working through it; with
// metrics-server scaled to nothing the group answers 503 (it is
// metrics-server's, not the built-in); deleting the manifest gives the
// built-in back. It needs the aggregation layer (APIServices, the proxy
// to an extension API server through its Service, the
// extension-apiserver-authentication ConfigMap).
func TestMetricsServerAggregated(t *testing.T) {
	podCIDR := freeCIDR(t, "10.202")
	cp, node := startMetricsServerCluster(t, "node-ms-agg", podCIDR)
	manifest := metricsServerManifest(t, true)
	t.Cleanup(func() { removeMetricsServer(t, cp, node, manifest) })
	cp.mustStdin(metricsServerLoad, "apply", "-f", "-")
	cp.must("wait", "--for=condition=Ready", "pod/load", "--timeout=120s")

	// The built-in metrics first (their window is the nodelet's 10 s).
	top := func() (string, error) {
		out, errOut, err := cp.kubectl("top", "node", node.name, "--no-headers")
		if err != nil {
			return errOut, err
		}
		return out, nil
	}
	window := func() string {
		out, _, _ := cp.kubectl("get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes/"+node.name)
		var m struct{ Window string }
		json.Unmarshal([]byte(out), &m)
		return m.Window
	}
	testkit.Eventually(t, 60*time.Second, "kubectl top node with the built-in metrics", func() bool {
		out, err := top()
		return err == nil && strings.HasPrefix(out, node.name+" ") && window() == "10s"
	})

	cp.mustStdin(manifest, "apply", "-f", "-")
	waitRolledOut(t, cp, "kube-system", "deployment/metrics-server")
	testkit.Eventually(t, 60*time.Second, "the APIService v1beta1.metrics.k8s.io Available", func() bool {
		out, _, _ := cp.kubectl("get", "apiservice", "v1beta1.metrics.k8s.io", "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`)
		return out == "True"
	})
	var out string
	var err error
	testkit.Eventually(t, 60*time.Second, "kubectl top node and pod through metrics-server", func() bool {
		if out, err = top(); err != nil || !strings.HasPrefix(out, node.name+" ") {
			return false
		}
		pods, _, err := cp.kubectl("top", "pod", "load", "--no-headers")
		return err == nil && strings.HasPrefix(pods, "load ")
	})
	t.Logf("kubectl top node through metrics-server: %s (window %s)", strings.TrimSpace(out), window())
	if logs, _, _ := cp.kubectl("-n", "kube-system", "logs", "deployment/metrics-server"); scrapeErrors.MatchString(logs) {
		t.Errorf("metrics-server could not scrape the node:\n%s", strings.Join(scrapeErrors.FindAllString(logs, -1), "\n"))
	}

	// With no metrics-server running, the group is unavailable: the API
	// server no longer answers it from its own metrics.
	cp.must("-n", "kube-system", "scale", "deployment/metrics-server", "--replicas=0")
	testkit.Eventually(t, 90*time.Second, "metrics.k8s.io unavailable without metrics-server", func() bool {
		_, errOut, err := cp.kubectl("get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes")
		return err != nil && (strings.Contains(errOut, "ServiceUnavailable") || strings.Contains(errOut, "503") ||
			strings.Contains(errOut, "the server is currently unable to handle the request"))
	})

	// Deleting metrics-server gives the built-in metrics back.
	if out, errOut, err := cp.kubectlStdin(manifest, "delete", "-f", "-", "--ignore-not-found"); err != nil {
		t.Fatalf("delete metrics-server: %v\n%s%s", err, out, errOut)
	}
	testkit.Eventually(t, 60*time.Second, "kubectl top node with the built-in metrics again", func() bool {
		out, err := top()
		return err == nil && strings.HasPrefix(out, node.name+" ") && window() == "10s"
	})
}
