package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodelet/nodelet/test/testkit"
)

// TestNodeUpstreamBehaviours: behaviours of upstream's kubelet that its
// node conformance tests check, through the real kubectl on a real node:
// activeDeadlineSeconds, the termination message from the log, the
// downward API's default limits, /etc/hosts of a host-network pod, and
// sysctls (safe ones set, unsafe ones refused).
func TestNodeUpstreamBehaviours(t *testing.T) {
	cp := startControlPlane(t, t.TempDir(), freePort(t))
	node := startRealNode(t, cp, "node-behave")
	testkit.Eventually(t, 60*time.Second, "node Ready", func() bool {
		out, _, _ := cp.kubectl("get", "node", node.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True"
	})
	cp.must("apply", "-f", "testdata/node-behaviours.yaml")
	field := func(pod, path string) string {
		out, _, _ := cp.kubectl("get", "pod", pod, "-o", "jsonpath="+path)
		return out
	}
	finished := func(t *testing.T, pod, phase string) {
		t.Helper()
		testkit.Eventually(t, 60*time.Second, pod+" "+phase, func() bool { return field(pod, "{.status.phase}") == phase })
	}

	t.Run("activeDeadlineSeconds", func(t *testing.T) {
		testkit.Eventually(t, 60*time.Second, "deadline Failed/DeadlineExceeded", func() bool {
			return field("deadline", "{.status.phase} {.status.reason}") == "Failed DeadlineExceeded"
		})
		if msg := field("deadline", "{.status.message}"); msg != "Pod was active on the node longer than the specified deadline" {
			t.Errorf("message %q", msg)
		}
		testkit.Eventually(t, 30*time.Second, "its container stopped", func() bool {
			return field("deadline", "{.status.containerStatuses[0].state.terminated.reason}") != ""
		})
		testkit.Eventually(t, 30*time.Second, "a DeadlineExceeded event", func() bool {
			out, _, _ := cp.kubectl("get", "events", "--field-selector", "involvedObject.name=deadline,reason=DeadlineExceeded", "-o", "name")
			return strings.TrimSpace(out) != ""
		})
	})
	t.Run("termination message from the log", func(t *testing.T) {
		finished(t, "fallback", "Failed")
		if msg := field("fallback", "{.status.containerStatuses[0].state.terminated.message}"); msg != "DONE" {
			t.Errorf("termination message %q, want DONE", msg)
		}
		if out := cp.must("logs", "fallback"); out != "DONE" {
			t.Errorf("kubectl logs: %q, want DONE without a newline", out)
		}
	})
	t.Run("limits default to allocatable", func(t *testing.T) {
		finished(t, "limits", "Succeeded")
		cpu := resource.MustParse(cp.must("get", "node", node.name, "-o", "jsonpath={.status.allocatable.cpu}"))
		mem := resource.MustParse(cp.must("get", "node", node.name, "-o", "jsonpath={.status.allocatable.memory}"))
		want := fmt.Sprintf("CPU_LIMIT=%d MEMORY_LIMIT=%d", (cpu.MilliValue()+999)/1000, mem.Value())
		if out := strings.TrimSpace(cp.must("logs", "limits")); out != want {
			t.Errorf("downward API limits: %q, want %q", out, want)
		}
	})
	t.Run("hosts file of a host-network pod", func(t *testing.T) {
		finished(t, "hostnet", "Succeeded")
		host, err := os.ReadFile("/etc/hosts")
		if err != nil {
			t.Fatal(err)
		}
		out := cp.must("logs", "hostnet")
		if !strings.HasPrefix(out, string(host)) || !strings.Contains(out, "# Entries added by HostAliases.\n192.0.2.7\tfoo.local\tbar.local") {
			t.Errorf("/etc/hosts of the host-network pod:\n%s\nwant the host's:\n%s\nthen the aliases", out, host)
		}
	})
	t.Run("sysctls", func(t *testing.T) {
		finished(t, "safe-sysctl", "Succeeded")
		if out := strings.Join(strings.Fields(cp.must("logs", "safe-sysctl")), " "); out != "20000 21000" {
			t.Errorf("safe sysctl in the pod: %q", out)
		}
		finished(t, "unsafe-sysctl", "Failed")
		if got := field("unsafe-sysctl", "{.status.reason}"); got != "SysctlForbidden" {
			t.Errorf("unsafe sysctl: reason %q, want SysctlForbidden", got)
		}
		if msg := field("unsafe-sysctl", "{.status.message}"); !strings.Contains(msg, `forbidden sysctl: "kernel.sem" not allowlisted`) {
			t.Errorf("unsafe sysctl: message %q", msg)
		}
	})

	cp.must("delete", "-f", "testdata/node-behaviours.yaml", "--ignore-not-found", "--wait=false")
	testkit.Eventually(t, 90*time.Second, "no pods", func() bool {
		out, _, _ := cp.kubectl("get", "pods", "-o", "name")
		return strings.TrimSpace(out) == ""
	})
	waitNoLeftovers(t, node)
}
