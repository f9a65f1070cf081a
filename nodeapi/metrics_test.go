package nodeapi

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestMetrics: /metrics and /metrics/probes serve the configured
// handlers to the allowed callers only, and answer 503 without them.
func TestMetrics(t *testing.T) {
	text := func(s string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, s) })
	}
	n := newTestNode(t, func(c *Config) {
		c.Metrics, c.ProbeMetrics = text("kubelet_running_pods 2\n"), text("prober_probe_total 1\n")
	})
	for path, metric := range map[string]string{"/metrics": "kubelet_running_pods 2", "/metrics/probes": "prober_probe_total 1"} {
		for who, want := range map[string]int{"anonymous": http.StatusUnauthorized, "user": http.StatusForbidden,
			"apiserver": http.StatusOK, "admin": http.StatusOK} {
			code, body := n.doAs(t, who, "GET", path)
			if code != want {
				t.Errorf("%s as %s: %d, want %d (%s)", path, who, code, want, body)
			}
			if want == http.StatusOK && body != metric+"\n" {
				t.Errorf("%s as %s: %s", path, who, body)
			}
		}
	}
	// /metrics/resource is still the resource metrics.
	if code, body := n.do(t, "GET", "/metrics/resource"); code != http.StatusOK || !strings.Contains(body, "node_cpu_usage_seconds_total") {
		t.Errorf("/metrics/resource: %d %s", code, body)
	}

	none := newTestNode(t, nil)
	for _, path := range []string{"/metrics", "/metrics/probes"} {
		code, body := none.do(t, "GET", path)
		if st := status(t, body); code != http.StatusServiceUnavailable || st.Code != http.StatusServiceUnavailable {
			t.Errorf("%s without metrics: %d %s", path, code, body)
		}
	}
}

// TestProfiling: upstream's profiling handler answers under /debug/pprof.
func TestProfiling(t *testing.T) {
	n := newTestNode(t, nil)
	for path, want := range map[string]string{"/debug/pprof/": "goroutine", "/debug/pprof/cmdline": "", "/debug/pprof/goroutine?debug=1": "goroutine profile"} {
		code, body := n.do(t, "GET", path)
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("GET %s: %d, want 200 with %q (%.200s)", path, code, want, body)
		}
	}
}
