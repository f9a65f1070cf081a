package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/testkit"
)

const helmRuns = 5 // installs per Helm version

// BenchmarkHelmInstall measures `helm install --wait` of the demo chart
// (testdata/helm/demo: eight objects, nginx available on a real node with
// the image present), wall time as a user sees it, for Helm 3 and Helm 4,
// helmRuns times each; between runs the release is uninstalled and its
// pods and namespace are waited out. Run with -benchtime 1x.
func BenchmarkHelmInstall(b *testing.B) {
	cp := startControlPlane(b, b.TempDir(), freePort(b))
	node := startRealNode(b, cp, "node-helm-bench")
	testkit.Eventually(b, 60*time.Second, "node Ready", func() bool {
		out, _, _ := cp.kubectl("get", "node", node.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True"
	})
	benchHelmInstalls(b, cp)
	waitNoLeftovers(b, node)
}

// BenchmarkUpstreamHelmInstall is BenchmarkHelmInstall against
// kube-apiserver and the kubelet (see upstream_workloads_bench_test.go).
// Skipped unless run through scripts/bench-upstream.sh.
func BenchmarkUpstreamHelmInstall(b *testing.B) {
	u := startUpstreamControlPlane(b)
	n := startUpstreamNode(b, u, "upstream-helm-bench")
	benchHelmInstalls(b, u.controlPlane)
	testkit.Eventually(b, 2*time.Minute, "no running container on the upstream node", func() bool { return n.runningTasks(b) == 0 })
}

func benchHelmInstalls(b *testing.B, cp *controlPlane) {
	b.Helper()
	helms := map[int]*helmClient{3: newHelm(b, cp, 3), 4: newHelm(b, cp, 4)}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, major := range []int{3, 4} {
			h := helms[major]
			var runs []time.Duration
			for j := range helmRuns {
				ns := fmt.Sprintf("bench-helm%d-%d-%d", major, i, j)
				start := time.Now()
				h.must("install", "demo", demoChart, "-n", ns, "--create-namespace", "--wait", "--timeout", "3m")
				runs = append(runs, time.Since(start))
				b.StopTimer()
				h.must("uninstall", "demo", "-n", ns, "--wait", "--timeout", "3m")
				cp.must("delete", "namespace", ns, "--timeout=120s")
				b.StartTimer()
			}
			reportRuns(b, fmt.Sprintf("helm%d-install-s", major), runs)
		}
	}
	b.StopTimer()
	b.ReportMetric(0, "ns/op")
	p := startRecordingProxy(b, cp)
	for _, major := range []int{3, 4} {
		logHelmRequests(b, helms[major].withKubeconfig(p.kubeconfig), p)
	}
	// Gone from the API only once the node has released them (upstream's
	// kubelet: volumes unmounted).
	testkit.Eventually(b, 2*time.Minute, "no pods", func() bool {
		out, _, _ := cp.kubectl("get", "pods", "-A", "-o", "name")
		return strings.TrimSpace(out) == ""
	})
}

// logHelmRequests runs the demo chart's install, upgrade, rollback and
// uninstall (each with --wait) with h through p, and logs for each step
// how many requests Helm sent, the discovery and OpenAPI ones, and every
// one answered with a status of 300 or more: what to compare between two
// API servers.
func logHelmRequests(b *testing.B, h *helmClient, p *recordingProxy) {
	b.Helper()
	ns := fmt.Sprintf("record-helm%d", h.major)
	p.take()
	for _, step := range [][]string{
		{"install", "demo", demoChart, "-n", ns, "--create-namespace", "--wait", "--timeout", "3m"},
		{"upgrade", "demo", demoChart, "-n", ns, "--set", "message=recorded", "--wait", "--timeout", "3m"},
		{"history", "demo", "-n", ns},
		{"rollback", "demo", "1", "-n", ns, "--wait", "--timeout", "3m"},
		{"uninstall", "demo", "-n", ns, "--wait", "--timeout", "3m"},
	} {
		h.must(step...)
		reqs := p.take()
		var lines []string
		for _, r := range reqs {
			path, _, _ := strings.Cut(r.URL, "?")
			if r.Code >= 300 || path == "/api" || path == "/apis" || path == "/version" || strings.HasPrefix(path, "/openapi") {
				lines = append(lines, "\n\t"+r.String())
			}
		}
		b.Logf("helm %d %s: %d requests%s", h.major, step[0], len(reqs), strings.Join(lines, ""))
	}
}
