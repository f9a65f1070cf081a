package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestControlPlaneMetrics checks that /metrics serves the control plane's
// Prometheus metrics, with upstream's names, to the admin kubeconfig:
// upstream's controllers' own metrics (the Job controller's) among them.
func TestControlPlaneMetrics(t *testing.T) {
	cp := startControlPlane(t, t.TempDir(), freePort(t))
	cp.must("create", "deployment", "web", "--image=nginx")
	cp.must("create", "job", "pi", "--image=busybox", "--", "true")
	want := []string{
		`apiserver_request_total{code="201",component="apiserver",group="apps",resource="deployments",scope="namespace",subresource="",verb="POST",version="v1"}`,
		`apiserver_request_duration_seconds_bucket{`,
		`apiserver_storage_objects{resource="deployments.apps"} 1`,
		`etcd_request_duration_seconds_bucket{`,
		`workqueue_adds_total{name="deployment"}`,
		`job_controller_job_syncs_total{`,
	}
	// Declared up front at 0; wait until the deployment's pods (there are
	// no nodes) have been tried.
	const unschedulable = `scheduler_schedule_attempts_total{profile="default-scheduler",result="unschedulable"}`
	// Controllers and the scheduler start after the leader lease is taken,
	// and the scheduler tries the deployment's pods (no nodes) after that.
	var out string
	deadline := time.Now().Add(30 * time.Second)
	for {
		out = cp.must("get", "--raw", "/metrics")
		missing := ""
		for _, w := range want {
			if !strings.Contains(out, w) {
				missing = w
				break
			}
		}
		if missing == "" && !counted(out, unschedulable) {
			missing = unschedulable + " > 0"
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks %s:\n%s", missing, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// counted reports whether the series named exactly by series has a
// non-zero value in the exposition out.
func counted(out, series string) bool {
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v != "0"
		}
	}
	return false
}
