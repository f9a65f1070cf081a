package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/testkit"
)

// The workload benchmarks of workloads_bench_test.go against upstream
// Kubernetes (upstream_cluster_test.go): the same scenarios, manifests and
// clocks, with etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler v1.37.2 and a kubelet v1.34.4 on containerd's CRI plugin
// in place of our control plane and nodelet. Skipped unless run through
// scripts/bench-upstream.sh.

// BenchmarkUpstreamJob is BenchmarkWorkloadsJob against upstream.
func BenchmarkUpstreamJob(b *testing.B) {
	c := upstreamWorkloadCluster(b, "upstream-job-bench")
	for i := 0; i < b.N; i++ {
		benchJob(b, c, i)
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkUpstreamStatefulSet is BenchmarkWorkloadsStatefulSet against
// upstream.
func BenchmarkUpstreamStatefulSet(b *testing.B) {
	c := upstreamWorkloadCluster(b, "upstream-sts-bench")
	for i := 0; i < b.N; i++ {
		benchStatefulSet(b, c, i)
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkUpstreamDeployment is BenchmarkWorkloadsDeployment against
// upstream.
func BenchmarkUpstreamDeployment(b *testing.B) {
	c := upstreamWorkloadCluster(b, "upstream-deploy-bench")
	for i := 0; i < b.N; i++ {
		benchDeployment(b, c, i)
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkUpstreamDaemonSetRollout is BenchmarkWorkloadsDaemonSetRollout
// against upstream with three nodes: three kubelets, each with its own
// containerd in a network namespace of its own, on one control plane. The
// nodes are not connected to each other as the lab's are; a DaemonSet
// rollout does not use pod-to-pod traffic.
func BenchmarkUpstreamDaemonSetRollout(b *testing.B) {
	for i := 0; i < b.N; i++ {
		u := startUpstreamControlPlane(b)
		for j := range 3 {
			startUpstreamNode(b, u, fmt.Sprintf("node%d", j+1))
		}
		c := workloadCluster{kubectl: u.controlPlane, cs: u.clientset(), drained: func(testing.TB) {}}
		reportRuns(b, "ds3-rollout-s", benchDaemonSetRollouts(b, c, 3))
	}
	b.ReportMetric(0, "ns/op")
}

// upstreamWorkloadCluster starts upstream's control plane and one node.
// Between runs it waits until the node runs no container any more (the
// kubelet removes exited containers only at its container GC, so that is
// as idle as an upstream node gets right after a delete).
func upstreamWorkloadCluster(b *testing.B, nodeName string) workloadCluster {
	u := startUpstreamControlPlane(b)
	n := startUpstreamNode(b, u, nodeName)
	return workloadCluster{kubectl: u.controlPlane, cs: u.clientset(), drained: func(b testing.TB) {
		testkit.Eventually(b, 2*time.Minute, "no running container on the upstream node", func() bool { return n.runningTasks(b) == 0 })
	}}
}
