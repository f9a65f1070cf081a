package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/testkit"
)

// TestAPIServicesLocal: every group-version the control plane serves has
// a local APIService, Available as upstream's are (kubectl get
// apiservices), a deleted one comes back, and the authentication
// configuration extension servers read is published.
func TestAPIServicesLocal(t *testing.T) {
	cp := startControlPlane(t, t.TempDir(), freePort(t))
	want := []string{"v1.", "v1.apps", "v2.autoscaling", "v1.apiregistration.k8s.io", "v1beta1.metrics.k8s.io"}
	var out string
	testkit.Eventually(t, 30*time.Second, "local APIServices Available", func() bool {
		out, _, _ = cp.kubectl("get", "apiservices", "--no-headers")
		for _, name := range want {
			if !strings.Contains(out, name+" ") {
				return false
			}
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if f := strings.Fields(line); len(f) < 3 || f[1] != "Local" || f[2] != "True" {
				return false
			}
		}
		return true
	})
	if strings.Count(out, "\n") < 15 {
		t.Fatalf("too few APIServices:\n%s", out)
	}

	cp.must("delete", "apiservice", "v1.apps")
	testkit.Eventually(t, 30*time.Second, "v1.apps registered again", func() bool {
		status, _, _ := cp.kubectl("get", "apiservice", "v1.apps", "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`)
		return status == "True"
	})

	var data map[string]string
	testkit.Eventually(t, 30*time.Second, "extension-apiserver-authentication published", func() bool {
		raw, _, err := cp.kubectl("get", "configmap", "-n", "kube-system", "extension-apiserver-authentication", "-o", "jsonpath={.data}")
		return err == nil && json.Unmarshal([]byte(raw), &data) == nil
	})
	if !strings.Contains(data["client-ca-file"], "BEGIN CERTIFICATE") || !strings.Contains(data["requestheader-client-ca-file"], "BEGIN CERTIFICATE") ||
		data["client-ca-file"] == data["requestheader-client-ca-file"] || data["requestheader-allowed-names"] != `["front-proxy-client"]` ||
		data["requestheader-username-headers"] != `["X-Remote-User"]` {
		t.Fatalf("extension-apiserver-authentication: %v", data)
	}
}
