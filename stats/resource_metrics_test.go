package stats_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nodelet/nodelet/stats"
)

func scrape(t *testing.T, c *stats.Collector) string {
	t.Helper()
	rec := httptest.NewRecorder()
	c.ResourceMetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics/resource", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("content type %q", ct)
	}
	body, _ := io.ReadAll(rec.Body)
	return string(body)
}

// t0ms is t0 in Unix milliseconds, the exposition format's timestamps.
const t0ms = "1767323045000"

func TestResourceMetrics(t *testing.T) {
	rt := &fakeRuntime{}
	c, _ := newCollector(t, rt)
	if got := scrape(t, c); !strings.Contains(got, "\nscrape_error 1\n") || strings.Contains(got, "node_cpu") {
		t.Errorf("before any sample:\n%s", got)
	}
	app := cm("web", "app", "a", 0, 1_500_000_000, 4194304)
	rt.set(nil, app, cm("web", "", "sb", 0, 500_000_000, 100))
	sample(t, c)
	start := app.StartedAt.Unix()
	want := `# HELP container_cpu_usage_seconds_total Cumulative cpu time consumed by the container in core-seconds
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="app",namespace="default",pod="web"} 1.5 ` + t0ms + `
# HELP container_memory_working_set_bytes Current working set of the container in bytes
# TYPE container_memory_working_set_bytes gauge
container_memory_working_set_bytes{container="app",namespace="default",pod="web"} 4.194304e+06 ` + t0ms + `
# HELP container_start_time_seconds Start time of the container since unix epoch in seconds
# TYPE container_start_time_seconds gauge
container_start_time_seconds{container="app",namespace="default",pod="web"} 1.767322985e+09
# HELP node_cpu_usage_seconds_total Cumulative cpu time consumed by the node in core-seconds
# TYPE node_cpu_usage_seconds_total counter
node_cpu_usage_seconds_total 10 ` + t0ms + `
# HELP node_memory_working_set_bytes Current working set of the node in bytes
# TYPE node_memory_working_set_bytes gauge
node_memory_working_set_bytes 5.12e+09 ` + t0ms + `
# HELP pod_cpu_usage_seconds_total Cumulative cpu time consumed by the pod in core-seconds
# TYPE pod_cpu_usage_seconds_total counter
pod_cpu_usage_seconds_total{namespace="default",pod="web"} 2 ` + t0ms + `
# HELP pod_memory_working_set_bytes Current working set of the pod in bytes
# TYPE pod_memory_working_set_bytes gauge
pod_memory_working_set_bytes{namespace="default",pod="web"} 4.194404e+06 ` + t0ms + `
# HELP resource_scrape_error 1 if there was an error while getting container metrics, 0 otherwise
# TYPE resource_scrape_error gauge
resource_scrape_error 0
# HELP scrape_error 1 if there was an error while getting container metrics, 0 otherwise
# TYPE scrape_error gauge
scrape_error 0
`
	if start != 1767322985 {
		t.Fatalf("fixture start time %d changed; update the expected output", start)
	}
	if got := scrape(t, c); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}

	// A failed sample: the error shows, the last values stay.
	rt.set(errors.New("containerd is away"))
	if err := c.Sample(context.Background()); err == nil {
		t.Fatal("no error")
	}
	got := scrape(t, c)
	if !strings.Contains(got, "\nscrape_error 1\n") || !strings.Contains(got, "\nresource_scrape_error 1\n") ||
		!strings.Contains(got, `pod_cpu_usage_seconds_total{namespace="default",pod="web"} 2 `+t0ms) {
		t.Errorf("after a failed sample:\n%s", got)
	}
}
