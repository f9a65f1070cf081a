package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/testkit"
)

// TestPodLifecycleOnRealNode: what a user sees when things happen to pods,
// through the real kubectl: an OOM-killed container, and the node's events
// in kubectl describe.
func TestPodLifecycleOnRealNode(t *testing.T) {
	cp := startControlPlane(t, t.TempDir(), freePort(t))
	node := startRealNode(t, cp, "node-life")
	testkit.Eventually(t, 60*time.Second, "node Ready", func() bool {
		out, _, _ := cp.kubectl("get", "node", node.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True"
	})
	cp.must("apply", "-f", "testdata/lifecycle-pods.yaml")

	t.Run("OOMKilled", func(t *testing.T) {
		testkit.Eventually(t, 60*time.Second, "hog OOMKilled", func() bool {
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
		testkit.Eventually(t, 30*time.Second, "the pod's events in kubectl describe", func() bool {
			out = cp.must("describe", "pod", "web")
			return strings.Contains(out, "already present on machine") && strings.Contains(out, "Created container web") &&
				strings.Contains(out, "Started container web") && strings.Contains(out, "kubelet")
		})
		testkit.Eventually(t, 30*time.Second, "the node's events", func() bool {
			out = cp.must("get", "events", "--field-selector", "involvedObject.kind=Node", "-o", "custom-columns=REASON:.reason", "--no-headers")
			return strings.Contains(out, "Starting") && strings.Contains(out, "NodeReady")
		})
		cp.must("delete", "pod", "web")
		testkit.Eventually(t, 30*time.Second, "a Killing event", func() bool {
			out = cp.must("get", "events", "--field-selector", "involvedObject.name=web,reason=Killing", "-o", "name")
			return strings.TrimSpace(out) != ""
		})
	})

	t.Run("volumes", func(t *testing.T) { testVolumes(t, cp) })
	t.Run("service env", func(t *testing.T) {
		env := cp.must("exec", "vols", "--", "env")
		ip := cp.must("get", "service", "kubernetes", "-o", "jsonpath={.spec.clusterIP}")
		for _, want := range []string{"KUBERNETES_SERVICE_HOST=" + ip, "KUBERNETES_SERVICE_PORT=443", "KUBERNETES_PORT=tcp://" + ip + ":443"} {
			if !strings.Contains(env, want) {
				t.Errorf("no %s in the container's env:\n%s", want, env)
			}
		}
	})
	t.Run("probes", func(t *testing.T) { testProbes(t, cp) })
	t.Run("hooks", func(t *testing.T) { testHooks(t, cp) })

	cp.must("delete", "-f", "testdata/lifecycle-pods.yaml", "--ignore-not-found", "--wait=false")
	testkit.Eventually(t, 90*time.Second, "no pods", func() bool {
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
	testkit.Eventually(t, 60*time.Second, "the changed ConfigMap in the running pod", func() bool {
		return strings.TrimSpace(exec("cat /cfg/greeting")) == "bonjour"
	})
}

// testProbes: readiness by HTTP follows the served file, a startup probe
// holds liveness back, a liveness failure restarts the container exactly
// once with Unhealthy and Killing events.
func testProbes(t *testing.T, cp *controlPlane) {
	field := func(path string) string {
		out, _, _ := cp.kubectl("get", "pod", "probed", "-o", "jsonpath="+path)
		return out
	}
	ready := func(c string) string {
		return field(fmt.Sprintf(`{.status.containerStatuses[?(@.name=="%s")].ready}`, c))
	}
	testkit.Eventually(t, 60*time.Second, "web ready (HTTP probe)", func() bool { return ready("web") == "true" })
	// slow: running, its startup probe failing, liveness held back.
	time.Sleep(3 * time.Second)
	if got := field(`{.status.containerStatuses[?(@.name=="slow")].started} {.status.containerStatuses[?(@.name=="slow")].restartCount} {.status.conditions[?(@.type=="Ready")].status}`); got != "false 0 False" {
		t.Fatalf("slow before its startup probe passes (started restarts podReady): %q", got)
	}
	cp.must("exec", "probed", "-c", "slow", "--", "touch", "/tmp/alive", "/tmp/started")
	testkit.Eventually(t, 30*time.Second, "slow started and ready, the pod Ready", func() bool {
		return field(`{.status.containerStatuses[?(@.name=="slow")].started} {.status.containerStatuses[?(@.name=="slow")].ready} {.status.conditions[?(@.type=="Ready")].status}`) == "true true True"
	})
	// Readiness follows the file httpd serves.
	cp.must("exec", "probed", "-c", "web", "--", "rm", "/www/index.html")
	testkit.Eventually(t, 30*time.Second, "web not ready", func() bool { return ready("web") == "false" })
	cp.must("exec", "probed", "-c", "web", "--", "sh", "-c", "echo ok > /www/index.html")
	testkit.Eventually(t, 30*time.Second, "web ready again", func() bool { return ready("web") == "true" })
	// Liveness: the restarted web recreates /tmp/alive, so one restart.
	cp.must("exec", "probed", "-c", "web", "--", "rm", "/tmp/alive")
	testkit.Eventually(t, 60*time.Second, "web restarted by its liveness probe", func() bool {
		return field(`{.status.containerStatuses[?(@.name=="web")].restartCount}`) == "1" && ready("web") == "true"
	})
	time.Sleep(3 * time.Second)
	if n := field(`{.status.containerStatuses[?(@.name=="web")].restartCount}`); n != "1" {
		st := field(`{.status.containerStatuses[?(@.name=="web")]}`)
		ev, _, _ := cp.kubectl("get", "events", "--field-selector", "involvedObject.name=probed", "-o", "custom-columns=T:.lastTimestamp,REASON:.reason,MESSAGE:.message", "--no-headers")
		t.Errorf("web restarted %s times, want once; status %s\nevents:\n%s", n, st, ev)
	}
	events := cp.must("get", "events", "--field-selector", "involvedObject.name=probed", "-o", "custom-columns=REASON:.reason,MESSAGE:.message", "--no-headers")
	for _, want := range []string{"Liveness probe failed", "Container web failed liveness probe, will be restarted", "Readiness probe failed", "Startup probe failed"} {
		if !strings.Contains(events, want) {
			t.Errorf("no event %q in:\n%s", want, events)
		}
	}
}

const hooksPods = `
apiVersion: v1
kind: Pod
metadata:
  name: hooks
spec:
  terminationGracePeriodSeconds: 10
  containers:
  - name: main
    image: busybox:1.36
    command: ["sh", "-c", "trap 'echo term >> /hook/log; exit 0' TERM; while :; do sleep 0.1; done"]
    volumeMounts: [{name: hook, mountPath: /hook}]
    lifecycle:
      postStart:
        exec: {command: ["sh", "-c", "echo poststart >> /hook/log"]}
      preStop:
        exec: {command: ["sh", "-c", "echo prestop >> /hook/log; sleep 1"]}
  volumes:
  - name: hook
    hostPath: {path: %q, type: DirectoryOrCreate}
---
apiVersion: v1
kind: Pod
metadata:
  name: badhook
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox:1.36
    command: ["sleep", "100000"]
    lifecycle:
      postStart:
        exec: {command: ["sh", "-c", "exit 3"]}
`

// testHooks: postStart runs after the start, preStop before the stop
// signal (the container's TERM trap writes after it), and a failing
// postStart kills the container with a FailedPostStartHook event.
func testHooks(t *testing.T, cp *controlPlane) {
	dir := t.TempDir()
	if out, errOut, err := cp.kubectlStdin(fmt.Sprintf(hooksPods, dir), "apply", "-f", "-"); err != nil {
		t.Fatalf("apply: %v %s %s", err, out, errOut)
	}
	cp.must("wait", "--for=condition=Ready", "pod/hooks", "--timeout=60s")
	cp.must("delete", "pod", "hooks", "--wait=true", "--timeout=60s")
	log, err := os.ReadFile(filepath.Join(dir, "log"))
	if err != nil || string(log) != "poststart\nprestop\nterm\n" {
		t.Errorf("hook log %q (%v), want poststart, prestop, term", log, err)
	}
	testkit.Eventually(t, 60*time.Second, "badhook restarted after its failed postStart", func() bool {
		out, _, _ := cp.kubectl("get", "pod", "badhook", "-o", "jsonpath={.status.containerStatuses[0].restartCount}")
		return out != "" && out != "0"
	})
	events := cp.must("get", "events", "--field-selector", "involvedObject.name=badhook,reason=FailedPostStartHook", "-o", "custom-columns=MSG:.message", "--no-headers")
	if !strings.Contains(events, "Exec lifecycle hook") {
		t.Errorf("FailedPostStartHook events: %q", events)
	}
	cp.must("delete", "pod", "badhook", "--wait=false")
}
