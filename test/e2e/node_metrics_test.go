package e2e

import (
	"context"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/testkit"
	"github.com/nodelet/nodelet/test/testkit/testregistry"
)

// nodeMetricsPods: "probed" has an exec readiness probe every second;
// "pulled" runs an image that is not on the node (IMAGE, pushed to a
// registry the test runs), so the nodelet pulls it.
const nodeMetricsPods = `apiVersion: v1
kind: Pod
metadata:
  name: probed
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: busybox:1.36
    command: ["sleep", "100000"]
    readinessProbe:
      exec:
        command: ["true"]
      periodSeconds: 1
---
apiVersion: v1
kind: Pod
metadata:
  name: pulled
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: IMAGE
    command: ["sleep", "100000"]
`

// TestNodeMetrics checks the nodelet's /metrics, read as users do through
// the API server's nodes/proxy: after a pod was pulled, started and
// probed, upstream's kubelet and prober metrics are there with sensible
// values.
func TestNodeMetrics(t *testing.T) {
	cp := startControlPlane(t, t.TempDir(), freePort(t))
	node := startRealNode(t, cp, "node-metrics")
	reg := testregistry.Start(t, "", "")
	// The nodelet reaches the registry at the same address inside its
	// namespace (plain HTTP: a loopback registry with a port).
	forwardIntoNetns(t, "/run/netns/"+node.netns, reg.Host)
	image := reg.Host + "/library/busybox:pulled"
	testregistry.NewImageSource(t).Push(t, reg, "library/busybox:pulled")
	testkit.Eventually(t, 60*time.Second, "node Ready", func() bool {
		out, _, _ := cp.kubectl("get", "node", node.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True"
	})
	start := time.Now()
	cp.mustStdin(strings.ReplaceAll(nodeMetricsPods, "IMAGE", image), "apply", "-f", "-")
	cp.must("wait", "--for=condition=Ready", "pod/probed", "pod/pulled", "--timeout=120s")
	elapsed := time.Since(start).Seconds()

	path := "/api/v1/nodes/" + node.name + "/proxy/metrics"
	var out string
	var problems []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		out = cp.must("get", "--raw", path)
		if problems = checkNodeMetrics(out, node.name, elapsed); len(problems) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s:\n%s\n\n%s", path, strings.Join(problems, "\n"), grepSamples(out, "kubelet_", "prober_", "nodelet_"))
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("pod start SLI: %d pods, %.3fs on average (total %.3fs); image pull %.3fs; PLEG relist %.4fs on average",
		int(sample(out, "kubelet_pod_start_sli_duration_seconds_count")),
		sample(out, "kubelet_pod_start_sli_duration_seconds_sum")/sample(out, "kubelet_pod_start_sli_duration_seconds_count"),
		sample(out, "kubelet_pod_start_total_duration_seconds_sum")/sample(out, "kubelet_pod_start_total_duration_seconds_count"),
		sample(out, "kubelet_image_pull_duration_seconds_sum", `image_size_in_bytes="0-10MB"`),
		sample(out, "kubelet_pleg_relist_duration_seconds_sum")/sample(out, "kubelet_pleg_relist_duration_seconds_count"))

	// As upstream, /metrics/probes has the probe metrics alone.
	probes := cp.must("get", "--raw", path+"/probes")
	if !strings.Contains(probes, `prober_probe_total{container="app",namespace="default",pod="probed"`) || strings.Contains(probes, "kubelet_") {
		t.Errorf("%s/probes:\n%s", path, probes)
	}

	// Prometheus scrapes the node directly with its ServiceAccount's
	// token: the nodelet asks the API server who it is (TokenReview) and
	// whether it may get nodes/metrics (SubjectAccessReview); an account
	// without the grant gets upstream kubelet's 403.
	cp.must("create", "serviceaccount", "prometheus")
	cp.must("create", "serviceaccount", "stranger")
	cp.must("create", "clusterrole", "node-metrics", "--verb=get", "--resource=nodes/metrics")
	cp.must("create", "clusterrolebinding", "prometheus-node-metrics", "--clusterrole=node-metrics", "--serviceaccount=default:prometheus")
	ip := cp.must("get", "node", node.name, "-o", `jsonpath={.status.addresses[?(@.type=="InternalIP")].address}`)
	scrape := func(account string) (string, string) {
		token := strings.TrimSpace(cp.must("create", "token", account))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, err := node.inNetns(ctx, "curl", "-sk", "-H", "Authorization: Bearer "+token, "-w", "\n%{http_code}",
			"https://"+net.JoinHostPort(ip, "10250")+"/metrics")
		if err != nil {
			t.Fatalf("curl the node's /metrics as %s: %v\n%s", account, err, out)
		}
		// curl -w puts the status code on a line of its own after the body.
		i := strings.LastIndex(out, "\n")
		return strings.TrimSpace(out[:max(i, 0)]), strings.TrimSpace(out[i+1:])
	}
	if body, code := scrape("prometheus"); code != "200" || !strings.Contains(body, "kubelet_running_pods") {
		t.Errorf("scrape with the prometheus account's token: %s\n%.300s", code, body)
	}
	if body, code := scrape("stranger"); code != "403" ||
		body != "Forbidden (user=system:serviceaccount:default:stranger, verb=get, resource=nodes, subresource(s)=[metrics])" {
		t.Errorf("scrape with an account without the grant: %s %q", code, body)
	}

	// Once the pods are gone, the gauges follow and the probe series go.
	cp.must("delete", "pod", "probed", "pulled")
	testkit.Eventually(t, 60*time.Second, "no running pods in the metrics", func() bool {
		out = cp.must("get", "--raw", path)
		return sample(out, "kubelet_running_pods") == 0 && sample(out, "kubelet_running_containers", `container_state="running"`) == 0 &&
			!strings.Contains(out, `pod="probed"`)
	})
}

// checkNodeMetrics lists what is missing or not sensible in the node's
// metrics after the two pods of nodeMetricsPods started within elapsed
// seconds.
func checkNodeMetrics(out, nodeName string, elapsed float64) []string {
	var problems []string
	check := func(ok bool, format string, args ...any) {
		if !ok {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	v := func(name string, labels ...string) float64 { return sample(out, name, labels...) }
	check(v("kubelet_node_name", `node="`+nodeName+`"`) == 1, "kubelet_node_name{node=%q} != 1", nodeName)

	// Both pods were measured, each within the time the test waited; the
	// SLI leaves the pull out, so it is below the total.
	sliCount, sliSum := v("kubelet_pod_start_sli_duration_seconds_count"), v("kubelet_pod_start_sli_duration_seconds_sum")
	totalCount, totalSum := v("kubelet_pod_start_total_duration_seconds_count"), v("kubelet_pod_start_total_duration_seconds_sum")
	check(sliCount == 2, "kubelet_pod_start_sli_duration_seconds_count = %v, want 2", sliCount)
	check(totalCount == sliCount, "kubelet_pod_start_total_duration_seconds_count = %v, want %v", totalCount, sliCount)
	check(sliSum > 0 && sliSum <= 2*elapsed+2, "kubelet_pod_start_sli_duration_seconds_sum = %v (pods started within %.1fs)", sliSum, elapsed)
	check(totalSum > sliSum && totalSum <= 2*elapsed+2, "kubelet_pod_start_total_duration_seconds_sum = %v, SLI %v", totalSum, sliSum)
	check(v("kubelet_pod_start_sli_duration_seconds_bucket", `le="+Inf"`) == sliCount, "SLI +Inf bucket != count")

	// The PLEG relists about once a second, each well under a second.
	relists, relistSum := v("kubelet_pleg_relist_duration_seconds_count"), v("kubelet_pleg_relist_duration_seconds_sum")
	check(relists > 0 && relistSum/relists < 1, "kubelet_pleg_relist_duration_seconds: %v relists, %vs", relists, relistSum)
	check(v("kubelet_pleg_relist_interval_seconds_count") > 0, "kubelet_pleg_relist_interval_seconds_count is 0")
	check(math.Abs(v("kubelet_pleg_last_seen_seconds")-float64(time.Now().Unix())) < 30, "kubelet_pleg_last_seen_seconds = %v", v("kubelet_pleg_last_seen_seconds"))

	// Two pods with a running sandbox, one running container each.
	check(v("kubelet_running_pods") == 2, "kubelet_running_pods = %v, want 2", v("kubelet_running_pods"))
	check(v("kubelet_running_containers", `container_state="running"`) == 2,
		"kubelet_running_containers{running} = %v, want 2", v("kubelet_running_containers", `container_state="running"`))

	// The readiness probe ran and succeeded; its duration is under its
	// 1s timeout.
	probe := []string{`container="app"`, `namespace="default"`, `pod="probed"`, `probe_type="Readiness"`}
	check(v("prober_probe_total", append(probe, `result="successful"`)...) >= 1, "prober_probe_total{pod=probed,result=successful} < 1")
	check(strings.Contains(out, `pod_uid="`), "prober_probe_total has no pod_uid")
	probes, probeSum := v("prober_probe_duration_seconds_count", probe...), v("prober_probe_duration_seconds_sum", probe...)
	check(probes >= 1 && probeSum/probes < 1, "prober_probe_duration_seconds{pod=probed}: %v probes, %vs", probes, probeSum)

	// One pull, of a small image, from a loopback registry.
	pulls, pullSum := v("kubelet_image_pull_duration_seconds_count", `image_size_in_bytes="0-10MB"`), v("kubelet_image_pull_duration_seconds_sum", `image_size_in_bytes="0-10MB"`)
	check(pulls == 1 && pullSum > 0 && pullSum < elapsed, "kubelet_image_pull_duration_seconds{0-10MB}: %v pulls, %vs", pulls, pullSum)

	check(v("go_goroutines") > 0 && v("process_resident_memory_bytes") > 0, "no Go or process metrics")
	return problems
}

// sample returns the value of the first sample of the metric name whose
// labels include every one of labels (`key="value"`), or NaN.
func sample(out, name string, labels ...string) float64 {
	for _, line := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest == "" || rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		i := strings.LastIndexByte(rest, ' ')
		series := rest[:i]
		match := true
		for _, l := range labels {
			if !strings.Contains(series, l) {
				match = false
				break
			}
		}
		if !match {
			continue
		}
		f, err := strconv.ParseFloat(rest[i+1:], 64)
		if err != nil {
			return math.NaN()
		}
		return f
	}
	return math.NaN()
}

// grepSamples keeps the sample lines of the metrics with these prefixes.
func grepSamples(out string, prefixes ...string) string {
	var keep []string
	for _, line := range strings.Split(out, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(line, p) && !strings.Contains(line, "_bucket{") {
				keep = append(keep, line)
				break
			}
		}
	}
	return strings.Join(keep, "\n")
}
