package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// BenchmarkCustomResourceCreates measures durable creates per second of
// a custom resource whose CRD has a structural schema with defaults, an
// enum, a pattern and a CEL rule (testdata/widget-crd.yaml), beside
// ConfigMap creates in the same control plane: 64 client-go clients
// through the controlplane binary, as BenchmarkControlPlaneCreates. Run
// with -benchtime 1x.
func BenchmarkCustomResourceCreates(b *testing.B) {
	cp := startControlPlane(b, b.TempDir(), freePort(b))
	benchCustomResourceCreates(b, cp)
}

// BenchmarkUpstreamCustomResourceCreates is BenchmarkCustomResourceCreates
// against kube-apiserver v1.37.2 on etcd 3.7.0. Skipped unless run
// through scripts/bench-upstream.sh.
func BenchmarkUpstreamCustomResourceCreates(b *testing.B) {
	u := startUpstreamControlPlane(b)
	benchCustomResourceCreates(b, u.controlPlane)
}

func benchCustomResourceCreates(b *testing.B, cp *controlPlane) {
	b.Helper()
	crd, err := os.ReadFile("testdata/widget-crd.yaml")
	if err != nil {
		b.Fatal(err)
	}
	cp.mustStdin(string(crd), "apply", "-f", "-")
	cp.must("wait", "--for=condition=Established", "crd/widgets.example.com", "--timeout=30s")
	dyn, err := dynamic.NewForConfig(cp.restConfig())
	if err != nil {
		b.Fatal(err)
	}
	widgets := dyn.Resource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"})
	for i := 0; i < b.N; i++ {
		b.ReportMetric(benchCreates(b, cp.clientset(), i), "configmap-creates/s")
		ns := fmt.Sprintf("creates-%d", i)
		var failed atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for c := range createClients {
			wg.Go(func() {
				for j := range createsEach {
					w := &unstructured.Unstructured{Object: map[string]any{
						"apiVersion": "example.com/v1", "kind": "Widget",
						"metadata": map[string]any{"name": fmt.Sprintf("w-%d-%d", c, j)},
						"spec":     map[string]any{"size": int64(j % 10), "code": "abc"},
					}}
					if _, err := widgets.Namespace(ns).Create(context.Background(), w, metav1.CreateOptions{}); err != nil {
						if failed.Add(1) == 1 {
							b.Errorf("create widget: %v", err)
						}
					}
				}
			})
		}
		wg.Wait()
		took := time.Since(start)
		if failed.Load() > 0 {
			b.Fatalf("%d widget creates failed", failed.Load())
		}
		b.ReportMetric(float64(createClients*createsEach)/took.Seconds(), "widget-creates/s")
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkControlPlaneMemoryWithCRDs reports the controlplane's resident
// memory idle after start, then with 50 CRDs (each a structural schema
// with a CEL rule, like testdata/widget-crd.yaml) Established and served,
// then after kubectl has read discovery and the OpenAPI documents
// (kubectl explain of one of them). Each figure after 20 s of quiet.
func BenchmarkControlPlaneMemoryWithCRDs(b *testing.B) {
	for i := 0; i < b.N; i++ {
		cp := startControlPlane(b, b.TempDir(), freePort(b))
		benchMemoryWithCRDs(b, cp, cp.cmd.Process.Pid)
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkUpstreamMemoryWithCRDs is BenchmarkControlPlaneMemoryWithCRDs
// for kube-apiserver v1.37.2 (its own RSS; etcd's is not counted), see
// upstream_workloads_bench_test.go. Skipped unless run through
// scripts/bench-upstream.sh.
func BenchmarkUpstreamMemoryWithCRDs(b *testing.B) {
	for i := 0; i < b.N; i++ {
		u := startUpstreamControlPlane(b)
		benchMemoryWithCRDs(b, u.controlPlane, u.procs[1].cmd.Process.Pid)
	}
	b.ReportMetric(0, "ns/op")
}

// benchMemoryWithCRDs measures pid's RSS idle, with 50 CRDs served, and
// after a kubectl explain of one of them.
func benchMemoryWithCRDs(b *testing.B, cp *controlPlane, pid int) {
	b.Helper()
	const crds = 50
	crd, err := os.ReadFile("testdata/widget-crd.yaml")
	if err != nil {
		b.Fatal(err)
	}
	settle := func() float64 {
		time.Sleep(20 * time.Second)
		return rssMB(b, pid)
	}
	b.ReportMetric(settle(), "idle-MiB")
	var all strings.Builder
	for n := range crds {
		// widgets.example.com → widgetsN.groupN.example.com
		one := strings.NewReplacer("widgets.example.com", fmt.Sprintf("widgets%d.group%d.example.com", n, n),
			"group: example.com", fmt.Sprintf("group: group%d.example.com", n),
			"plural: widgets", fmt.Sprintf("plural: widgets%d", n), "singular: widget", fmt.Sprintf("singular: widget%d", n),
			"kind: Widget", fmt.Sprintf("kind: Widget%d", n), "shortNames: [wd]", fmt.Sprintf("shortNames: [wd%d]", n)).Replace(string(crd))
		all.WriteString(one + "\n---\n")
	}
	cp.mustStdin(all.String(), "apply", "-f", "-")
	cp.must("wait", "--for=condition=Established", "crd", "--all", "--timeout=120s")
	if out := cp.must("api-resources", "--api-group=group49.example.com", "-o", "name"); !strings.Contains(out, "widgets49") {
		b.Fatalf("CRD 49 not served: %q", out)
	}
	b.ReportMetric(settle(), "50crds-MiB")
	cp.must("explain", "widgets7.spec")
	b.ReportMetric(settle(), "50crds-after-explain-MiB")
}
