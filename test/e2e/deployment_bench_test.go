package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The 30-replica Deployment of issue 22: from `kubectl apply` to all 30
// pods Ready, on one real node, ours and upstream's (the same scenario
// through workloadCluster; upstream_workloads_bench_test.go).

const workloadDeployReplicas = 30

// workloadDeployment is a Deployment of 30 sleepers, no probes.
func workloadDeployment(name string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s, labels: {bench: workloads}}
spec:
  replicas: %[2]d
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s, bench: workloads}}
    spec:
      terminationGracePeriodSeconds: 5%[4]s
      containers:
      - %[3]s
`, name, workloadDeployReplicas, sleeper, podSpecExtra())
}

// BenchmarkWorkloadsDeployment: a Deployment of 30 replicas (busybox
// sleeping, no probes), from the start of `kubectl apply` to a watch on
// its pods having seen all 30 Ready at once, on one real node. Runs 3
// times per iteration and reports the median, min and max, and the same of
// the medians over the pods of bind (first sighting to a node) and start
// (from there to Ready: the node's part). Run with -benchtime 1x.
func BenchmarkWorkloadsDeployment(b *testing.B) {
	c := ourWorkloadCluster(b, "node-deploy-bench")
	for i := 0; i < b.N; i++ {
		benchDeployment(b, c, i)
	}
	b.ReportMetric(0, "ns/op")
}

// benchDeployment runs the Deployment scenario workloadRuns times.
func benchDeployment(b *testing.B, c workloadCluster, iteration int) {
	benchPodRuns(b, "deploy30-ready-s", "deploy-pod-bind-s", "deploy-pod-start-s", func(r int) jobRun {
		return benchDeploymentReady(b, c, fmt.Sprintf("deploy-%d-%d", iteration, r))
	})
}

// benchDeploymentReady applies the Deployment and returns the time until
// a watch on its pods has seen all 30 Ready at once, with the medians of
// bind and start over the pods; then deletes it.
func benchDeploymentReady(b testing.TB, c workloadCluster, name string) jobRun {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), workloadTimeout)
	defer cancel()
	w, err := c.cs.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		b.Fatalf("watch pods of %s: %v", name, err)
	}
	defer w.Stop()
	var mu sync.Mutex
	seen, bound, readyAt := map[string]time.Time{}, map[string]time.Time{}, map[string]time.Time{}
	ready := map[string]bool{}
	start := time.Now()
	c.kubectl.mustStdin(workloadDeployment(name), "apply", "-f", "-")
	waitEvent(b, w, fmt.Sprintf("%d pods of %s Ready", workloadDeployReplicas, name), func(obj any) bool {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return false
		}
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		firstAt(seen, p.Name, now, true)
		firstAt(bound, p.Name, now, p.Spec.NodeName != "")
		ready[p.Name] = p.DeletionTimestamp == nil && isReady(*p)
		firstAt(readyAt, p.Name, now, ready[p.Name])
		n := 0
		for _, r := range ready {
			if r {
				n++
			}
		}
		return n == workloadDeployReplicas
	})
	r := jobRun{total: time.Since(start)}
	r.bind, r.run, _ = podParts(seen, bound, readyAt)
	b.Logf("deployment %s: %d pods Ready after %.2fs; per pod (median): bound %.3fs after its creation, Ready %.3fs after that",
		name, workloadDeployReplicas, r.total.Seconds(), r.bind.Seconds(), r.run.Seconds())
	deleteWorkload(b, c, "deployment/"+name)
	return r
}
