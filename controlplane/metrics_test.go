package controlplane

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-base/metrics/legacyregistry"
	jobmetrics "k8s.io/kubernetes/pkg/controller/job/metrics"
)

// A named queue reports upstream's workqueue_* series under its name. The
// provider is passed in the queue's config here, not through the global, so
// the test does not depend on which control plane in the process set it.
func TestWorkqueueProvider(t *testing.T) {
	reg := prometheus.NewRegistry()
	p := newWorkqueueProvider()
	for _, c := range p.collectors() {
		reg.MustRegister(c)
	}
	q := workqueue.NewTypedRateLimitingQueueWithConfig( // An hour's backoff: the retried key stays out of adds and depth.
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Hour, time.Hour),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "test", MetricsProvider: p})
	defer q.ShutDown()
	q.Add("a")
	q.Add("b")
	q.AddRateLimited("c")
	k, _ := q.Get()
	q.Done(k)
	want := `
# HELP workqueue_adds_total Total number of adds handled by workqueue
# TYPE workqueue_adds_total counter
workqueue_adds_total{name="test"} 2
# HELP workqueue_depth Current depth of workqueue
# TYPE workqueue_depth gauge
workqueue_depth{name="test"} 1
# HELP workqueue_retries_total Total number of retries handled by workqueue
# TYPE workqueue_retries_total counter
workqueue_retries_total{name="test"} 1
`
	if err := testutil.CollectAndCompare(reg, strings.NewReader(want),
		"workqueue_adds_total", "workqueue_depth", "workqueue_retries_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg, "workqueue_work_duration_seconds"); n != 1 {
		t.Errorf("%d work duration series, want 1", n)
	}
}

func TestNewRegistry(t *testing.T) {
	reg, err := newRegistry()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
}

// Upstream's controller metrics, which go to component-base's legacy
// registry, are served beside the control plane's own, and the Go and
// process families are not served twice (which would fail the scrape).
func TestUpstreamMetricsServed(t *testing.T) {
	reg, err := newRegistry()
	if err != nil {
		t.Fatal(err)
	}
	jobmetrics.Register()
	jobmetrics.JobSyncNum.WithLabelValues("NonIndexed", "success", "pods_created").Inc()
	families, err := prometheus.Gatherers{reg, upstreamMetrics(legacyregistry.DefaultGatherer)}.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	seen := map[string]int{}
	for _, f := range families {
		seen[f.GetName()]++
	}
	if seen["job_controller_job_syncs_total"] != 1 || seen["go_goroutines"] != 1 || seen["process_cpu_seconds_total"] != 1 {
		t.Errorf("families: job syncs %d, go_goroutines %d, process_cpu_seconds_total %d",
			seen["job_controller_job_syncs_total"], seen["go_goroutines"], seen["process_cpu_seconds_total"])
	}
}
