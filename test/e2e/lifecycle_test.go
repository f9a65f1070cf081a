package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestPodLifecycleOnRealNode: what a user sees when things happen to pods,
// through the real kubectl: an OOM-killed container, and the node's events
// in kubectl describe.
func TestPodLifecycleOnRealNode(t *testing.T) {
	cp := startControlPlane(t, t.TempDir(), freePort(t))
	node := startRealNode(t, cp, "node-life")
	waitUntil(t, 60*time.Second, "node Ready", func() bool {
		out, _, _ := cp.kubectl("get", "node", node.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True"
	})
	cp.must("apply", "-f", "testdata/lifecycle-pods.yaml")

	t.Run("OOMKilled", func(t *testing.T) {
		waitUntil(t, 60*time.Second, "hog OOMKilled", func() bool {
			out, _, _ := cp.kubectl("get", "pod", "hog", "-o", "jsonpath={.status.containerStatuses[0].state.terminated.reason} {.status.containerStatuses[0].state.terminated.exitCode}")
			return out == "OOMKilled 137"
		})
		if out := cp.must("get", "pod", "hog"); !strings.Contains(out, "OOMKilled") {
			t.Errorf("kubectl get pod hog:\n%s", out)
		}
	})
	t.Run("events", func(t *testing.T) {
		cp.must("wait", "--for=condition=Ready", "pod/web", "--timeout=60s")
		var out string
		waitUntil(t, 30*time.Second, "the pod's events in kubectl describe", func() bool {
			out = cp.must("describe", "pod", "web")
			return strings.Contains(out, "already present on machine") && strings.Contains(out, "Created container web") &&
				strings.Contains(out, "Started container web") && strings.Contains(out, "kubelet")
		})
		waitUntil(t, 30*time.Second, "the node's events", func() bool {
			out = cp.must("get", "events", "--field-selector", "involvedObject.kind=Node", "-o", "custom-columns=REASON:.reason", "--no-headers")
			return strings.Contains(out, "Starting") && strings.Contains(out, "NodeReady")
		})
		cp.must("delete", "pod", "web")
		waitUntil(t, 30*time.Second, "a Killing event", func() bool {
			out = cp.must("get", "events", "--field-selector", "involvedObject.name=web,reason=Killing", "-o", "name")
			return strings.TrimSpace(out) != ""
		})
	})

	t.Run("volumes", func(t *testing.T) { testVolumes(t, cp) })

	cp.must("delete", "-f", "testdata/lifecycle-pods.yaml", "--ignore-not-found", "--wait=false")
	waitUntil(t, 90*time.Second, "no pods", func() bool {
		out, _, _ := cp.kubectl("get", "pods", "-o", "name")
		return strings.TrimSpace(out) == ""
	})
	waitNoLeftovers(t, node)
}

// testVolumes: configMap, secret, downwardAPI, memory emptyDir and a
// subPath, as the container sees them; a changed ConfigMap reaches the
// running pod.
func testVolumes(t *testing.T, cp *controlPlane) {
	cp.must("wait", "--for=condition=Ready", "pod/vols", "--timeout=60s")
	exec := func(cmd string) string {
		return cp.must("exec", "vols", "--", "sh", "-c", cmd)
	}
	for cmd, want := range map[string]string{
		"cat /cfg/greeting":           "hello",
		"cat /sec/password":           "s3cret",
		"stat -L -c %a /sec/password": "400",
		"cat /info/name":              "vols",
		"cat /info/labels":            `app="vols"`,
		"cat /etc/greeting":           "hello",
		"grep ' /mem ' /proc/mounts":  "tmpfs",
		"grep ' /mem ' /proc/mounts | grep -o size=[0-9a-z]*": "size=8192k",
		"touch /cfg/x 2>&1 || echo read-only":                 "read-only",
	} {
		if out := exec(cmd); !strings.Contains(out, want) {
			t.Errorf("%s: %q, want %q", cmd, out, want)
		}
	}
	cp.must("patch", "configmap", "cfg", "-p", `{"data":{"greeting":"bonjour"}}`)
	waitUntil(t, 60*time.Second, "the changed ConfigMap in the running pod", func() bool {
		return strings.TrimSpace(exec("cat /cfg/greeting")) == "bonjour"
	})
}
