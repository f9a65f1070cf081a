package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/testkit"
)

// BenchmarkNodeMemory measures what a real node costs in memory beside its
// pods: the proportional set size (PSS, so shared pages count once) of the
// nodelet, its containerd, every shim and every logging process, idle and
// with 100 running pods, and the difference per pod. The pods' own
// processes (pause, nginx) are not counted. Run with -benchtime 1x.
func BenchmarkNodeMemory(b *testing.B) {
	cp := startControlPlane(b, b.TempDir(), freePort(b))
	node := startRealNode(b, cp, "node-mem")
	testkit.Eventually(b, 60*time.Second, "node Ready", func() bool {
		out, _, _ := cp.kubectl("get", "node", node.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True"
	})
	cs := cp.clientset()
	ready := watchReady(b, cs)
	time.Sleep(3 * time.Second)
	idle := nodeMemory(b, node)

	for i := 0; i < b.N; i++ {
		for j := range 100 {
			createBenchPod(b, cs, node.name, fmt.Sprintf("mem-%d-%d", i, j))
		}
		for j := range 100 {
			ready.wait(b, fmt.Sprintf("mem-%d-%d", i, j))
		}
		time.Sleep(10 * time.Second) // steady state
		full := nodeMemory(b, node)
		for _, k := range []string{"nodelet", "containerd", "shims", "logging"} {
			b.ReportMetric(full[k], k+"-MB")
		}
		b.ReportMetric(full["count-logging"], "logging-procs")
		b.ReportMetric(full["total"], "total100-MB")
		b.ReportMetric(idle["total"], "idle-MB")
		b.ReportMetric((full["total"]-idle["total"])/100*1024, "per-pod-KB")
		deleteBenchPods(b, cs, node)
	}
}

// nodeMemory sums the PSS (MB) of the node's own processes by kind:
// nodelet (the nodelet process), containerd, shims (containerd-shim
// processes serving this containerd), logging (any process the node runs
// for container logs: the per-container log driver or the node's logger).
func nodeMemory(b testing.TB, node *realNode) map[string]float64 {
	b.Helper()
	out := map[string]float64{}
	for _, p := range processes() {
		kind := memoryKind(p, node)
		if kind == "" {
			continue
		}
		pss, err := pssMB(p.pid)
		if err != nil {
			continue // exited meanwhile
		}
		out[kind] += pss
		out["count-"+kind]++
		out["total"] += pss
	}
	if out["count-nodelet"] != 1 || out["count-containerd"] != 1 {
		b.Fatalf("node processes not found: %v", out)
	}
	return out
}

// memoryKind tells which of the node's parts p is ("" for none).
func memoryKind(p proc, node *realNode) string {
	switch {
	case p.pid == node.cmd.Process.Pid:
		return "nodelet"
	case !strings.Contains(p.cmdline, node.dir) && !strings.Contains(p.cmdline, node.ctdAddr):
		return "" // another node's, or no node's
	case filepath.Base(p.args[0]) == "nodelet-logger":
		return "logging" // the node's logger
	case len(p.args) > 1 && p.args[1] == "nodelet-cri-log":
		return "logging" // a per-container log driver (before the logger)
	case strings.Contains(p.args[0], "containerd-shim") && strings.Contains(p.cmdline, node.ctdAddr):
		return "shims"
	case strings.HasSuffix(p.args[0], "containerd") && strings.Contains(p.cmdline, node.ctdAddr):
		return "containerd"
	}
	return ""
}

// pssMB reads a process's Pss from smaps_rollup.
func pssMB(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "Pss:" {
			kb, err := strconv.ParseFloat(f[1], 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no Pss for pid %d", pid)
}
