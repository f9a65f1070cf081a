package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/test/testkit"
)

// TestNginxOnRealNode is the product's smoke test with the real kubectl
// and a real node: the nginx sample rolls out on containerd, every pod
// answers on its IP inside the node's namespace, scales up and down, rolls
// to a new tag, survives a nodelet crash (no pod restarted, a pod deleted
// meanwhile cleaned up), and leaves nothing behind when deleted.
func TestNginxOnRealNode(t *testing.T) {
	cp := startControlPlane(t, t.TempDir(), freePort(t))
	node := startRealNode(t, cp, "node-e2e")
	testkit.Eventually(t, 60*time.Second, "node Ready", func() bool {
		out, _, _ := cp.kubectl("get", "node", node.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True"
	})
	if out := cp.must("get", "node", node.name, "-o", "jsonpath={.status.allocatable.cpu} {.status.capacity.cpu}"); !strings.Contains(out, "m ") {
		t.Fatalf("allocatable cpu should be capacity minus --system-reserved: %q", out)
	}

	cp.must("apply", "-f", "testdata/nginx-deployment.yaml")
	cp.must("rollout", "status", "deployment/nginx-deployment", "--timeout=120s")
	pods := nginxPods(t, cp, 3)
	assertNginxAnswers(t, node, pods)
	if n := node.shims(t); n != 3 {
		t.Fatalf("want one containerd shim per pod (3), have %d", n)
	}
	if out := cp.must("get", "pods", "-o", "wide"); strings.Count(out, "Running") != 3 || strings.Count(out, node.name) != 3 {
		t.Fatalf("kubectl get pods -o wide:\n%s", out)
	}

	cp.must("scale", "deployment/nginx-deployment", "--replicas=5")
	cp.must("rollout", "status", "deployment/nginx-deployment", "--timeout=120s")
	assertNginxAnswers(t, node, nginxPods(t, cp, 5))

	testCrashRestart(t, cp, node)

	cp.must("set", "image", "deployment/nginx-deployment", "nginx=nginx:1.23")
	cp.must("rollout", "status", "deployment/nginx-deployment", "--timeout=120s")
	rolled := nginxPods(t, cp, 5)
	for _, p := range rolled {
		if p.Spec.Containers[0].Image != "nginx:1.23" || !strings.HasSuffix(p.Status.ContainerStatuses[0].Image, "nginx:1.23") {
			t.Fatalf("pod %s after the roll: spec %s, status %s", p.Name, p.Spec.Containers[0].Image, p.Status.ContainerStatuses[0].Image)
		}
	}
	assertNginxAnswers(t, node, rolled)

	cp.must("scale", "deployment/nginx-deployment", "--replicas=0")
	testkit.Eventually(t, 90*time.Second, "no pods", func() bool {
		out, _, _ := cp.kubectl("get", "pods", "-o", "name")
		return strings.TrimSpace(out) == ""
	})
	cp.must("delete", "deployment/nginx-deployment")
	waitNoLeftovers(t, node)
}

// testCrashRestart kills the nodelet with SIGKILL, force-deletes one pod
// while it is down, and starts it again: the other pods keep their
// containers, the deleted pod's sandbox, IP and cgroup go, and the
// replacement pod runs.
func testCrashRestart(t *testing.T, cp *controlPlane, node *realNode) {
	t.Helper()
	before := nginxPods(t, cp, 5)
	node.kill()
	victim := before[0]
	cp.must("delete", "pod", victim.Name, "--grace-period=0", "--force")
	node.start()
	cp.must("rollout", "status", "deployment/nginx-deployment", "--timeout=120s")
	testkit.Eventually(t, 60*time.Second, "the deleted pod's containers and cgroup to go", func() bool {
		return !node.holdsPod(t, victim.UID)
	})
	after := map[string]corev1.Pod{}
	for _, p := range nginxPods(t, cp, 5) {
		after[p.Name] = p
	}
	for _, p := range before[1:] {
		got, ok := after[p.Name]
		if !ok {
			t.Fatalf("pod %s is gone after the nodelet restart", p.Name)
		}
		was, now := p.Status.ContainerStatuses[0], got.Status.ContainerStatuses[0]
		if now.ContainerID != was.ContainerID || now.RestartCount != 0 || got.Status.PodIP != p.Status.PodIP {
			t.Fatalf("pod %s changed across the restart: container %s -> %s, restarts %d, IP %s -> %s",
				p.Name, was.ContainerID, now.ContainerID, now.RestartCount, p.Status.PodIP, got.Status.PodIP)
		}
	}
	assertNginxAnswers(t, node, nginxPods(t, cp, 5))
}

// nginxPods waits until exactly want nginx pods exist, all Running and
// Ready with an IP, none terminating, and returns them.
func nginxPods(t *testing.T, cp *controlPlane, want int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	testkit.Eventually(t, 90*time.Second, fmt.Sprintf("%d ready nginx pods", want), func() bool {
		out, _, err := cp.kubectl("get", "pods", "-l", "app=nginx", "-o", "json")
		if err != nil {
			return false
		}
		var list corev1.PodList
		if json.Unmarshal([]byte(out), &list) != nil || len(list.Items) != want {
			return false
		}
		for _, p := range list.Items {
			if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" || !isReady(p) {
				return false
			}
		}
		pods = list.Items
		return true
	})
	return pods
}

func isReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// assertNginxAnswers fetches the nginx page from every pod IP inside the
// node's namespace.
func assertNginxAnswers(t *testing.T, node *realNode, pods []corev1.Pod) {
	t.Helper()
	seen := map[string]bool{}
	for _, p := range pods {
		if seen[p.Status.PodIP] {
			t.Fatalf("two pods share IP %s", p.Status.PodIP)
		}
		seen[p.Status.PodIP] = true
		out, err := node.httpGet("http://" + p.Status.PodIP + "/")
		if err != nil || !strings.Contains(out, "nginx") {
			t.Fatalf("nginx in pod %s at %s: %v: %q", p.Name, p.Status.PodIP, err, out)
		}
	}
}
