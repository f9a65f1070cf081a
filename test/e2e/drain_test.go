package e2e

import (
	"strings"
	"testing"
)

const drainObjects = `apiVersion: v1
kind: Node
metadata: {name: drain-node}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: web}}
---
apiVersion: v1
kind: Pod
metadata: {name: web-1, labels: {app: web}}
spec:
  nodeName: drain-node
  terminationGracePeriodSeconds: 0
  containers: [{name: app, image: busybox:1.36}]
---
apiVersion: v1
kind: Pod
metadata: {name: other-1, labels: {app: other}}
spec:
  nodeName: drain-node
  terminationGracePeriodSeconds: 0
  containers: [{name: app, image: busybox:1.36}]
`

// TestDrainRespectsDisruptionBudget drains a node (an object only: no
// nodelet; budget statuses are set by hand, as the disruption controller
// would compute them) with the
// real kubectl: the eviction is refused while the budget allows no
// disruption, and goes through once it allows one. Cordon works too.
func TestDrainRespectsDisruptionBudget(t *testing.T) {
	cp := startControlPlane(t, t.TempDir(), freePort(t))
	if _, errOut, err := cp.kubectlStdin(drainObjects, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply: %v\n%s", err, errOut)
	}
	for _, pod := range []string{"web-1", "other-1"} {
		cp.must("patch", "pod", pod, "--subresource=status", "--type=merge", "-p",
			`{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}`)
	}
	// Statuses set by hand that agree with what a disruption controller
	// would write (minAvailable 1 of one ready pod: none allowed;
	// minAvailable 0: one). desiredHealthy 2 first keeps the pod guarded
	// even if the node's lifecycle marked it unready meanwhile.
	setBudget := func(generation, allowed, desired string) {
		cp.must("patch", "pdb", "web", "--subresource=status", "--type=merge", "-p",
			`{"status":{"observedGeneration":`+generation+`,"disruptionsAllowed":`+allowed+`,"currentHealthy":1,"desiredHealthy":`+desired+`,"expectedPods":1}}`)
	}
	setBudget("1", "0", "2")
	drain := []string{"drain", "drain-node", "--ignore-daemonsets", "--force", "--pod-selector", "app=web", "--timeout", "5s"}
	out, errOut, err := cp.kubectl(drain...)
	if err == nil || !strings.Contains(errOut, "Cannot evict pod as it would violate the pod's disruption budget.") {
		t.Fatalf("drain while the budget allows nothing: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	if !strings.Contains(out, "node/drain-node cordoned") {
		t.Errorf("drain did not cordon:\n%s", out)
	}
	if got := cp.must("get", "pods", "-o", "name"); !strings.Contains(got, "pod/web-1") {
		t.Fatalf("web-1 gone after a refused drain:\n%s", got)
	}

	cp.must("patch", "pdb", "web", "--type=merge", "-p", `{"spec":{"minAvailable":0}}`)
	setBudget("2", "1", "0")
	out = cp.must(drain...)
	if !strings.Contains(out, "pod/web-1 evicted") || !strings.Contains(out, "node/drain-node drained") {
		t.Fatalf("drain once the budget allows one:\n%s", out)
	}
	if got := strings.TrimSpace(cp.must("get", "pods", "-o", "name")); got != "pod/other-1" {
		t.Fatalf("pods after the drain: %q, want only pod/other-1", got)
	}
	// The eviction took the one allowed disruption; the disruption
	// controller, which runs here, then drops web-1 from disruptedPods
	// once it is gone (the API test checks disruptedPods itself).
	if got := cp.must("get", "pdb", "web", "-o", "jsonpath={.status.disruptionsAllowed}"); got != "0" {
		t.Errorf("budget after the drain allows %q disruptions, want 0", got)
	}

	cp.must("uncordon", "drain-node")
	if got := cp.must("get", "node", "drain-node", "-o", "jsonpath={.spec.unschedulable}"); got != "" && got != "false" {
		t.Fatalf("unschedulable after uncordon: %q", got)
	}
	if out := cp.must("cordon", "drain-node"); !strings.Contains(out, "node/drain-node cordoned") {
		t.Fatalf("cordon: %s", out)
	}
	if got := cp.must("get", "node", "drain-node", "-o", "jsonpath={.spec.unschedulable}"); got != "true" {
		t.Fatalf("unschedulable after cordon: %q", got)
	}
}
