package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/hosttools"
	"github.com/nodelet/nodelet/test/testkit"
)

const debugTargetPod = `apiVersion: v1
kind: Pod
metadata:
  name: target
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox:1.36
    command: ["sleep", "100000"]
`

// TestKubectlDebug: kubectl debug through the real kubectl on a real node:
// an ephemeral container that sees its target's processes (piped stdin,
// then a terminal), reported and never restarted, and the copy-of-pod mode.
func TestKubectlDebug(t *testing.T) {
	cp := startControlPlane(t, t.TempDir(), freePort(t))
	node := startRealNode(t, cp, "node-kdebug")
	testkit.Eventually(t, 60*time.Second, "node Ready", func() bool {
		out, _, _ := cp.kubectl("get", "node", node.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True"
	})
	if out, errOut, err := cp.kubectlStdin(debugTargetPod, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply: %v\n%s%s", err, out, errOut)
	}
	cp.must("wait", "--for=condition=Ready", "pod/target", "--timeout=60s")
	field := func(path string) string {
		out, _, _ := cp.kubectl("get", "pod", "target", "-o", "jsonpath="+path)
		return out
	}

	t.Run("ephemeral container with stdin", func(t *testing.T) {
		out, errOut, err := cp.kubectlStdin("ps -o pid,args\nexit\n", "debug", "-i", "target", "--image=busybox:1.36",
			"--target=main", "-c", "debugger", "--", "sh")
		if err != nil || !strings.Contains(out, "sleep 100000") {
			t.Fatalf("kubectl debug -i --target=main: %v\nstdout: %s\nstderr: %s", err, out, errOut)
		}
		testkit.Eventually(t, 30*time.Second, "the debugger reported terminated", func() bool {
			return field(`{.status.ephemeralContainerStatuses[?(@.name=="debugger")].state.terminated.exitCode}`) == "0"
		})
		time.Sleep(2 * time.Second) // a restart would show by now
		if got := field(`{.status.ephemeralContainerStatuses[?(@.name=="debugger")].restartCount} {.status.ephemeralContainerStatuses[?(@.name=="debugger")].state.terminated.reason}`); got != "0 Completed" {
			t.Errorf("debugger after exit (restarts reason): %q", got)
		}
		if got := field(`{.status.phase} {.status.containerStatuses[0].restartCount}`); got != "Running 0" {
			t.Errorf("the target pod after debugging (phase restarts): %q", got)
		}
	})
	t.Run("ephemeral container with a terminal", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		line := fmt.Sprintf("KUBECACHEDIR=%s kubectl --kubeconfig %s debug -it target --image=busybox:1.36 --target=main -c tty-debugger -- sh -c 'sleep 1; tty; echo tty-done'",
			filepath.Join(cp.dataDir, "kubectl-cache"), cp.kubeconfig)
		b, err := hosttools.CommandContext(ctx, "script", "-qec", line, "/dev/null").CombinedOutput()
		if err != nil || !strings.Contains(string(b), "tty-done") || !strings.Contains(string(b), "/dev/pts/") {
			t.Fatalf("kubectl debug -it: %v\n%s", err, b)
		}
	})
	t.Run("a missing target", func(t *testing.T) {
		_, errOut, err := cp.kubectl("debug", "target", "--image=busybox:1.36", "--target=nope", "-c", "lost")
		if err == nil || !strings.Contains(errOut, "nope") {
			t.Errorf("debug with a missing target: %v\n%s", err, errOut)
		}
	})
	t.Run("copy of the pod", func(t *testing.T) {
		out, errOut, err := cp.kubectlStdin("ps -o pid,args\nexit\n", "debug", "target", "-i", "--copy-to=target-copy",
			"--share-processes", "--image=busybox:1.36", "-c", "dbg", "--", "sh")
		if err != nil || !strings.Contains(out, "sleep 100000") {
			t.Fatalf("kubectl debug --copy-to: %v\nstdout: %s\nstderr: %s", err, out, errOut)
		}
		if got := cp.must("get", "pod", "target-copy", "-o", "jsonpath={.spec.containers[*].name} {.spec.shareProcessNamespace}"); got != "main dbg true" {
			t.Errorf("the copy (containers shareProcessNamespace): %q", got)
		}
	})

	cp.must("delete", "pod", "target", "target-copy", "--ignore-not-found", "--wait=false")
	testkit.Eventually(t, 90*time.Second, "no pods", func() bool {
		out, _, _ := cp.kubectl("get", "pods", "-o", "name")
		return strings.TrimSpace(out) == ""
	})
	waitNoLeftovers(t, node)
}
