package e2e

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const (
	createClients = 64
	createsEach   = 100 // 6,400 ConfigMaps per run
)

// BenchmarkControlPlaneCreates measures durable ConfigMap creates per
// second through the controlplane binary (its default storage, bbolt
// with fsync) with 64 concurrent client-go clients sharing one
// connection pool, from this test process on the same 2 cores: the same
// load BenchmarkUpstreamAPICreates puts on kube-apiserver and etcd.
// Run with -benchtime 1x.
func BenchmarkControlPlaneCreates(b *testing.B) {
	cp := startControlPlane(b, b.TempDir(), freePort(b))
	for i := 0; i < b.N; i++ {
		b.ReportMetric(benchCreates(b, cp.clientset(), i), "creates/s")
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkUpstreamAPICreates is BenchmarkControlPlaneCreates against
// upstream's kube-apiserver v1.37.2 on etcd 3.7.0 (see
// upstream_workloads_bench_test.go). Skipped unless run through
// scripts/bench-upstream.sh.
func BenchmarkUpstreamAPICreates(b *testing.B) {
	u := startUpstreamControlPlane(b)
	for i := 0; i < b.N; i++ {
		b.ReportMetric(benchCreates(b, u.clientset(), i), "creates/s")
	}
	b.ReportMetric(0, "ns/op")
}

// benchCreates creates createClients*createsEach ConfigMaps in a
// namespace of run i and returns creates per second.
func benchCreates(b *testing.B, cs kubernetes.Interface, run int) float64 {
	b.Helper()
	ctx := context.Background()
	ns := fmt.Sprintf("creates-%d", run)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	var failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for c := range createClients {
		wg.Go(func() {
			for j := range createsEach {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d-%d", c, j)},
					Data: map[string]string{"key": "value"}}
				if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
					if failed.Add(1) == 1 {
						b.Errorf("create: %v", err)
					}
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if failed.Load() > 0 {
		b.Fatalf("%d creates failed", failed.Load())
	}
	return float64(createClients*createsEach) / took.Seconds()
}
