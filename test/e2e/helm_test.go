package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/images"
	"github.com/nodelet/nodelet/test/testkit"
)

// The charts of testdata/helm: demo (a ServiceAccount, a Role and
// RoleBinding, a ClusterRole and ClusterRoleBinding, a ConfigMap from the
// values, nginx as a Deployment mounting it, and a Service) and demo-crd (a
// CustomResourceDefinition in crds/ and a custom resource of it).
const (
	demoChart    = "testdata/helm/demo"
	demoCRDChart = "testdata/helm/demo-crd"
)

// helmClient runs one helm binary, built from the module proxy, against a
// cluster, with Helm's own state (cache, config, data) in a directory of
// the test's.
type helmClient struct {
	t     testing.TB
	major int
	bin   string
	env   []string
}

// newHelm builds (or takes from the cache, images.CacheDir) Helm of the
// given major version and returns a client of cp's cluster.
func newHelm(t testing.TB, cp *controlPlane, major int) *helmClient {
	t.Helper()
	bin, err := images.HelmBinary(images.CacheDir(), major)
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	env := []string{"KUBECONFIG=" + cp.kubeconfig, "HOME=" + home,
		"HELM_CACHE_HOME=" + filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME=" + filepath.Join(home, "config"),
		"HELM_DATA_HOME=" + filepath.Join(home, "data"),
		"PATH=" + os.Getenv("PATH")}
	return &helmClient{t: t, major: major, bin: bin, env: env}
}

// run runs helm with args under a five-minute limit.
func (h *helmClient) run(args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.bin, args...)
	cmd.Env = h.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// must runs helm and fails the test on error.
func (h *helmClient) must(args ...string) string {
	h.t.Helper()
	out, errOut, err := h.run(args...)
	if err != nil {
		h.t.Fatalf("helm %d %s: %v\nstdout: %s\nstderr: %s", h.major, strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// helmRevision is one entry of `helm history -o json`.
type helmRevision struct {
	Revision    int    `json:"revision"`
	Status      string `json:"status"`
	Chart       string `json:"chart"`
	Description string `json:"description"`
}

func (h *helmClient) history(ns, release string) []helmRevision {
	h.t.Helper()
	var revs []helmRevision
	out := h.must("history", release, "-n", ns, "-o", "json")
	if err := json.Unmarshal([]byte(out), &revs); err != nil {
		h.t.Fatalf("helm %d history: %v\n%s", h.major, err, out)
	}
	return revs
}

// TestHelm: Helm 3 and Helm 4, built from the module proxy, install the
// demo chart (every object, the Deployment available on a real node, the
// release stored as a Secret), upgrade it (a changed value rolls the
// Deployment), list its history, roll it back and uninstall it (every
// object and the release's Secrets gone), each in a namespace of its own
// on one cluster. The chart with a CustomResourceDefinition is
// TestHelmCRD's (helm_crd_test.go).
func TestHelm(t *testing.T) {
	// The Service's page is fetched through services/proxy: the pods'
	// addresses come from a CIDR no host route covers, routed to the node
	// (as in TestAPIProxyOnRealNode), so the API server's dial stays on
	// this host.
	podCIDR := freeCIDR(t, "10.203")
	cp := startControlPlane(t, t.TempDir(), freePort(t), "--cluster-cidr", podCIDR, "--node-cidr-mask-size", "24")
	node := startRealNode(t, cp, "node-helm")
	testkit.Eventually(t, 60*time.Second, "node Ready", func() bool {
		out, _, _ := cp.kubectl("get", "node", node.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True"
	})
	if got := cp.must("get", "node", node.name, "-o", "jsonpath={.spec.podCIDR}"); got != podCIDR {
		t.Fatalf("node pod CIDR %q, want %q", got, podCIDR)
	}
	routePodsThrough(t, node, podCIDR)
	for _, major := range []int{3, 4} {
		t.Run(fmt.Sprintf("helm%d", major), func(t *testing.T) {
			testHelmLifecycle(t, cp, newHelm(t, cp, major), podCIDR)
		})
	}
	t.Run("helm3 to helm4", func(t *testing.T) { testHelm3To4(t, cp, newHelm(t, cp, 3), newHelm(t, cp, 4)) })
	waitNoLeftovers(t, node)
}

// testHelm3To4: a release Helm 3 installed (client-side apply, its
// fields owned by the Update entries of manager "helm") is upgraded by
// Helm 4 with --server-side=true: Helm 4 patches each object's
// managedFields into its own Apply entry (a JSON patch, upstream's
// csaupgrade), then applies; rolled back and uninstalled by Helm 4.
func testHelm3To4(t *testing.T, cp *controlPlane, h3, h4 *helmClient) {
	ns, release := "helm3to4", "demo"
	t.Cleanup(func() {
		h4.run("uninstall", release, "-n", ns, "--ignore-not-found", "--wait", "--timeout", "2m")
		cp.kubectl("delete", "namespace", ns, "--ignore-not-found", "--timeout=120s")
	})
	managers := func(obj string) string {
		out, _, _ := cp.kubectl("-n", ns, "get", obj, "--show-managed-fields", "-o",
			`jsonpath={range .metadata.managedFields[?(@.manager=="helm")]}{.operation} {end}`)
		return strings.TrimSpace(out)
	}
	h3.must("install", release, demoChart, "-n", ns, "--create-namespace", "--wait", "--timeout", "3m")
	if got := managers("configmap/" + release + "-config"); got != "Update" {
		t.Errorf("after Helm 3's install: the ConfigMap's helm entries %q, want Update", got)
	}
	h4.must("upgrade", release, demoChart, "-n", ns, "--server-side=true", "--set", "message=helm4", "--wait", "--timeout", "3m")
	for _, obj := range demoObjects(ns, release) {
		if got := managers(obj); got != "Apply" {
			t.Errorf("after Helm 4's upgrade: %s's helm entries %q, want Apply only", obj, got)
		}
	}
	if got, _, _ := cp.kubectl("-n", ns, "get", "configmap", release+"-config", "-o", "jsonpath={.data.message}"); got != "helm4" {
		t.Errorf("after Helm 4's upgrade: the ConfigMap's message is %q", got)
	}
	h4.must("rollback", release, "1", "-n", ns, "--wait", "--timeout", "3m")
	if got, _, _ := cp.kubectl("-n", ns, "get", "configmap", release+"-config", "-o", "jsonpath={.data.message}"); got != "hello from helm" {
		t.Errorf("after Helm 4's rollback: the ConfigMap's message is %q", got)
	}
	h4.must("uninstall", release, "-n", ns, "--wait", "--timeout", "3m")
	for _, obj := range demoObjects(ns, release) {
		if got, _, _ := cp.kubectl("-n", ns, "get", obj, "--ignore-not-found", "-o", "name"); got != "" {
			t.Errorf("after uninstall: %s is still there", got)
		}
	}
	testkit.Eventually(t, 90*time.Second, "no pods of the release", func() bool {
		out, _, _ := cp.kubectl("-n", ns, "get", "pods", "-o", "name")
		return strings.TrimSpace(out) == ""
	})
}

// demoObjects are the objects the demo chart makes for a release in ns,
// as kubectl names them.
func demoObjects(ns, release string) []string {
	cluster := ns + "-" + release + "-node-reader"
	return []string{
		"serviceaccount/" + release,
		"configmap/" + release + "-config",
		"role.rbac.authorization.k8s.io/" + release + "-config-reader",
		"rolebinding.rbac.authorization.k8s.io/" + release + "-config-reader",
		"clusterrole.rbac.authorization.k8s.io/" + cluster,
		"clusterrolebinding.rbac.authorization.k8s.io/" + cluster,
		"deployment.apps/" + release,
		"service/" + release,
	}
}

func testHelmLifecycle(t *testing.T, cp *controlPlane, h *helmClient, podCIDR string) {
	ns, release := fmt.Sprintf("helm%d", h.major), "demo"
	// A failed step leaves nothing behind for the next Helm or the node's
	// leftover check.
	t.Cleanup(func() {
		h.run("uninstall", release, "-n", ns, "--ignore-not-found", "--wait", "--timeout", "2m")
		cp.kubectl("delete", "namespace", ns, "--ignore-not-found", "--timeout=120s")
	})
	get := func(args ...string) string {
		out, _, _ := cp.kubectl(append([]string{"-n", ns}, args...)...)
		return strings.TrimSpace(out)
	}
	_, pods, err := net.ParseCIDR(podCIDR)
	if err != nil {
		t.Fatal(err)
	}
	// page is the release's page through its Service, asked only while
	// every pod's address is in the routed podCIDR.
	page := func() string {
		for _, ip := range strings.Fields(get("get", "pods", "-o", "jsonpath={.items[*].status.podIP}")) {
			if !pods.Contains(net.ParseIP(ip)) {
				t.Fatalf("pod address %s outside the routed %s", ip, podCIDR)
			}
		}
		out, _, _ := cp.kubectl("get", "--raw", "/api/v1/namespaces/"+ns+"/services/"+release+":http/proxy/demo/index.html")
		return strings.TrimSpace(out)
	}

	// A dry run against the server makes nothing.
	h.must("install", release, demoChart, "-n", ns, "--create-namespace", "--dry-run=server")
	if out := get("get", "deployment", release, "--ignore-not-found", "-o", "name"); out != "" {
		t.Fatalf("--dry-run=server made %s", out)
	}

	start := time.Now()
	h.must("install", release, demoChart, "-n", ns, "--create-namespace", "--wait", "--timeout", "3m")
	t.Logf("helm %d install --wait: %v", h.major, time.Since(start).Round(time.Millisecond))
	for _, obj := range demoObjects(ns, release) {
		if got := get("get", obj, "-o", "name"); got != obj {
			t.Errorf("after install: %s is %q", obj, got)
		}
	}
	if got := get("get", "deployment", release, "-o", "jsonpath={.status.availableReplicas}"); got != "1" {
		t.Errorf("after install --wait: %q available replicas, want 1", got)
	}
	if got := get("get", "secret", "-l", "owner=helm,name="+release, "-o", "jsonpath={.items[*].metadata.name} {.items[*].metadata.labels.status}"); got != "sh.helm.release.v1.demo.v1 deployed" {
		t.Errorf("the release's storage: %q, want its first Secret, deployed", got)
	}
	// helm list -A: every namespace's release Secrets, by label selector.
	var listed []struct{ Name, Namespace, Status string }
	if out := h.must("list", "-A", "-o", "json"); json.Unmarshal([]byte(out), &listed) != nil || !slices.Contains(listed, struct{ Name, Namespace, Status string }{release, ns, "deployed"}) {
		t.Errorf("helm list -A: %s, want %s in %s deployed", out, release, ns)
	}
	sa := "system:serviceaccount:" + ns + ":" + release
	for _, can := range [][]string{{"get", "configmap/" + release + "-config"}, {"list", "nodes"}} {
		if got := get("auth", "can-i", can[0], can[1], "--as", sa); got != "yes" {
			t.Errorf("the chart's ServiceAccount: can-i %s %s = %q, want yes (its Role and ClusterRole)", can[0], can[1], got)
		}
	}
	testkit.Eventually(t, 60*time.Second, "the page through the Service", func() bool { return page() == "<p>hello from helm</p>" })
	// The chart's test hook: a pod fetching the page by the Service's
	// DNS name (Helm watches it to its end, then deletes it; a failed one
	// stays, with its log. Helm 3's --logs cannot read a deleted pod's).
	helmTest := func() {
		t.Helper()
		if out, errOut, err := h.run("test", release, "-n", ns, "--timeout", "2m"); err != nil {
			logs, _, _ := cp.kubectl("-n", ns, "logs", release+"-page-test")
			t.Fatalf("helm %d test: %v\n%s%s\nthe test pod's log:\n%s", h.major, err, out, errOut, logs)
		}
	}
	helmTest()
	checksum1 := get("get", "deployment", release, "-o", `jsonpath={.spec.template.metadata.annotations.checksum/config}`)

	// A changed value changes the ConfigMap, whose checksum in the pod
	// template rolls the Deployment.
	h.must("upgrade", release, demoChart, "-n", ns, "--set", "message=upgraded", "--wait", "--timeout", "3m")
	if got := get("get", "configmap", release+"-config", "-o", "jsonpath={.data.message}"); got != "upgraded" {
		t.Errorf("after upgrade: the ConfigMap's message is %q", got)
	}
	checksum2 := get("get", "deployment", release, "-o", `jsonpath={.spec.template.metadata.annotations.checksum/config}`)
	if checksum2 == checksum1 || checksum2 == "" {
		t.Errorf("after upgrade: the pod template's checksum/config %q, before %q", checksum2, checksum1)
	}
	cp.must("-n", ns, "rollout", "status", "deployment/"+release, "--timeout=120s")
	if got := get("get", "replicasets", "-l", "app.kubernetes.io/instance="+release, "-o", "name"); len(strings.Fields(got)) != 2 {
		t.Errorf("after upgrade: replica sets %q, want the old and the new", got)
	}
	if got := get("get", "deployment", release, "-o", "jsonpath={.metadata.annotations.deployment\\.kubernetes\\.io/revision}"); got != "2" {
		t.Errorf("after upgrade: the Deployment's revision %q, want 2", got)
	}
	testkit.Eventually(t, 60*time.Second, "the upgraded page through the Service", func() bool { return page() == "<p>upgraded</p>" })
	if got := h.must("get", "values", release, "-n", ns, "-o", "json"); strings.TrimSpace(got) != `{"message":"upgraded"}` {
		t.Errorf("helm get values: %s", got)
	}

	helmTest()

	revs := h.history(ns, release)
	if len(revs) != 2 || revs[0].Status != "superseded" || revs[1].Status != "deployed" || revs[1].Revision != 2 {
		t.Errorf("history after upgrade: %+v, want 1 superseded and 2 deployed", revs)
	}

	h.must("rollback", release, "1", "-n", ns, "--wait", "--timeout", "3m")
	revs = h.history(ns, release)
	if len(revs) != 3 || revs[2].Revision != 3 || revs[2].Status != "deployed" || revs[2].Description != "Rollback to 1" || revs[1].Status != "superseded" {
		t.Errorf("history after rollback: %+v, want 3 deployed (Rollback to 1), the others superseded", revs)
	}
	if got := get("get", "configmap", release+"-config", "-o", "jsonpath={.data.message}"); got != "hello from helm" {
		t.Errorf("after rollback: the ConfigMap's message is %q", got)
	}
	if got := get("get", "deployment", release, "-o", `jsonpath={.spec.template.metadata.annotations.checksum/config}`); got != checksum1 {
		t.Errorf("after rollback: the pod template's checksum/config %q, want the first %q", got, checksum1)
	}
	cp.must("-n", ns, "rollout", "status", "deployment/"+release, "--timeout=120s")
	testkit.Eventually(t, 60*time.Second, "the first page again through the Service", func() bool { return page() == "<p>hello from helm</p>" })
	if got := get("get", "secret", "-l", "owner=helm,name="+release, "-o", "name"); len(strings.Fields(got)) != 3 {
		t.Errorf("after rollback: the release's Secrets %q, want three", got)
	}

	h.must("uninstall", release, "-n", ns, "--wait", "--timeout", "3m")
	for _, obj := range demoObjects(ns, release) {
		if got := get("get", obj, "--ignore-not-found", "-o", "name"); got != "" {
			t.Errorf("after uninstall: %s is still there", got)
		}
	}
	if got := get("get", "secret", "-l", "owner=helm", "-o", "name"); got != "" {
		t.Errorf("after uninstall: the release's Secrets %q are still there", got)
	}
	if out, errOut, err := h.run("status", release, "-n", ns); err == nil || !strings.Contains(errOut, "not found") {
		t.Errorf("helm status after uninstall: %v\n%s%s", err, out, errOut)
	}
	testkit.Eventually(t, 90*time.Second, "no pods of the release", func() bool { return get("get", "pods", "-o", "name") == "" })
	cp.must("delete", "namespace", ns)
}

// withKubeconfig is h talking to the cluster of another kubeconfig (a
// recordingProxy's).
func (h *helmClient) withKubeconfig(kubeconfig string) *helmClient {
	c := *h
	c.env = append(slices.Clone(h.env), "KUBECONFIG="+kubeconfig) // the last value wins
	return &c
}
