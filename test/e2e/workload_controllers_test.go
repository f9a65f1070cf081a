package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/test/testkit"
)

// workloadControllersManifest: a Job of two completions, a DaemonSet and
// a StatefulSet of two, all busybox (pre-loaded on the node).
const workloadControllersManifest = `
apiVersion: batch/v1
kind: Job
metadata: {name: echo}
spec:
  completions: 2
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: echo, image: "busybox:1.36", command: [echo, done]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - {name: agent, image: "busybox:1.36", command: [sleep, "3600"]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  replicas: 2
  serviceName: web
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - {name: web, image: "busybox:1.36", command: [sleep, "3600"]}
`

// TestWorkloadControllersOnRealNode runs upstream's Job, DaemonSet and
// StatefulSet controllers against a real node: the Job's two pods run to
// completion and their log reads back, the DaemonSet's pod runs on the
// node, and the StatefulSet brings up web-0, then web-1 once web-0 is
// ready.
func TestWorkloadControllersOnRealNode(t *testing.T) {
	cp := startControlPlane(t, t.TempDir(), freePort(t))
	node := startRealNode(t, cp, "node-wl")
	testkit.Eventually(t, 60*time.Second, "node Ready", func() bool {
		out, _, _ := cp.kubectl("get", "node", node.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True"
	})
	if out, errOut, err := cp.kubectlStdin(workloadControllersManifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply: %v\n%s%s", err, out, errOut)
	}

	cp.must("wait", "--for=condition=complete", "job/echo", "--timeout=120s")
	if out := cp.must("get", "job/echo", "-o", "jsonpath={.status.succeeded}"); out != "2" {
		t.Fatalf("job echo succeeded %q, want 2", out)
	}
	if out := cp.must("logs", "job/echo"); strings.TrimSpace(out) != "done" {
		t.Fatalf("kubectl logs job/echo = %q, want done", out)
	}

	cp.must("rollout", "status", "daemonset/agent", "--timeout=120s")
	agents := podsWithLabel(t, cp, "app=agent")
	if len(agents) != 1 || agents[0].Spec.NodeName != node.name || agents[0].Status.Phase != corev1.PodRunning {
		t.Fatalf("daemonset pods: want one running on %s, have %d", node.name, len(agents))
	}

	cp.must("rollout", "status", "statefulset/web", "--timeout=120s")
	web := map[string]corev1.Pod{}
	for _, p := range podsWithLabel(t, cp, "app=web") {
		web[p.Name] = p
	}
	web0, web1 := web["web-0"], web["web-1"]
	if len(web) != 2 || !isReady(web0) || !isReady(web1) {
		t.Fatalf("statefulset pods: want web-0 and web-1 ready, have %v", web)
	}
	if readySince(web0).After(web1.CreationTimestamp.Time) {
		t.Fatalf("web-1 created at %s, before web-0 was ready (%s)", web1.CreationTimestamp, readySince(web0))
	}

	cp.must("delete", "job/echo", "daemonset/agent", "statefulset/web", "--wait=false")
	testkit.Eventually(t, 90*time.Second, "no pods", func() bool {
		out, _, _ := cp.kubectl("get", "pods", "-o", "name")
		return strings.TrimSpace(out) == ""
	})
	waitNoLeftovers(t, node)
}

// podsWithLabel lists the default namespace's pods matching selector.
func podsWithLabel(t *testing.T, cp *controlPlane, selector string) []corev1.Pod {
	t.Helper()
	var list corev1.PodList
	if err := json.Unmarshal([]byte(cp.must("get", "pods", "-l", selector, "-o", "json")), &list); err != nil {
		t.Fatalf("pods %s: %v", selector, err)
	}
	return list.Items
}

// readySince is when p last became Ready.
func readySince(p corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}
