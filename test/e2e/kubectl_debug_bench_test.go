package e2e

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/testkit"
)

const debugRuns = 10 // round trips per command

// BenchmarkKubectlDebug measures `kubectl debug -i POD --image=busybox
// --target=main -- sh` (a new ephemeral container started in the running
// pod, attached, one command typed, exited) beside `kubectl exec -i POD --
// sh` doing the same in the running container: wall time of the whole
// command as a user sees it, p50 and p99 of 10 runs each, on a real node
// with the image present (p99 of 10 runs is the slowest). Run with -benchtime 1x.
func BenchmarkKubectlDebug(b *testing.B) {
	cp := startControlPlane(b, b.TempDir(), freePort(b))
	node := startRealNode(b, cp, "node-kdebug-bench")
	testkit.Eventually(b, 60*time.Second, "node Ready", func() bool {
		out, _, _ := cp.kubectl("get", "node", node.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True"
	})
	benchDebugRoundTrips(b, cp)
	waitNoLeftovers(b, node)
}

// BenchmarkUpstreamKubectlDebug is BenchmarkKubectlDebug against
// kube-apiserver and the kubelet (see upstream_workloads_bench_test.go).
// Skipped unless run through scripts/bench-upstream.sh.
func BenchmarkUpstreamKubectlDebug(b *testing.B) {
	u := startUpstreamControlPlane(b)
	n := startUpstreamNode(b, u, "upstream-kdebug-bench")
	benchDebugRoundTrips(b, u.controlPlane)
	testkit.Eventually(b, 2*time.Minute, "no running container on the upstream node", func() bool { return n.runningTasks(b) == 0 })
}

// benchDebugRoundTrips runs the target pod, times debugRuns round trips
// of each command, reports them, and deletes the pod again.
func benchDebugRoundTrips(b *testing.B, cp *controlPlane) {
	b.Helper()
	if out, errOut, err := cp.kubectlStdin(debugTargetPod, "apply", "-f", "-"); err != nil {
		b.Fatalf("apply: %v\n%s%s", err, out, errOut)
	}
	cp.must("wait", "--for=condition=Ready", "pod/target", "--timeout=60s")
	// run times one command; it must print the round trip, or (kubectl
	// debug only) leave it in the new container's log: kubelet with
	// containerd's CRI sometimes attaches after the shell has already
	// answered, and kubectl then prints nothing. Such runs are counted.
	lost := 0
	run := func(container string, args ...string) time.Duration {
		start := time.Now()
		out, errOut, err := cp.kubectlStdin("echo round-trip; exit\n", args...)
		d := time.Since(start)
		if err == nil && !strings.Contains(out, "round-trip") && container != "" {
			if log, _, _ := cp.kubectl("logs", "target", "-c", container); strings.Contains(log, "round-trip") {
				lost++
				return d
			}
		}
		if err != nil || !strings.Contains(out, "round-trip") {
			b.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
		}
		return d
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var exec, debug []time.Duration
		for j := range debugRuns {
			exec = append(exec, run("", "exec", "-i", "target", "--", "sh"))
			name := fmt.Sprintf("dbg-%d-%d", i, j)
			debug = append(debug, run(name, "debug", "-i", "target", "--image=busybox:1.36", "--target=main",
				"-c", name, "--", "sh"))
		}
		for name, d := range map[string][]time.Duration{"exec": exec, "debug": debug} {
			sort.Slice(d, func(a, c int) bool { return d[a] < d[c] })
			b.ReportMetric(ms(d[len(d)/2]), name+"-p50-ms")
			b.ReportMetric(ms(d[len(d)-1]), name+"-max-ms")
		}
	}
	b.ReportMetric(float64(lost), "debug-output-lost")
	b.StopTimer()
	cp.must("delete", "pod", "target", "--wait=false")
	testkit.Eventually(b, 90*time.Second, "no pods", func() bool {
		out, _, _ := cp.kubectl("get", "pods", "-o", "name")
		return strings.TrimSpace(out) == ""
	})
}
