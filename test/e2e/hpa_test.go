package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/testkit"
)

// burnManifest: one busy-looping pod per replica, limited to 200m so that
// three cost the machine 0.6 CPU at most: twice its 100m request, 200%
// utilization against a 50% target.
const burnManifest = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: burn}
spec:
  replicas: 1
  selector: {matchLabels: {app: burn}}
  template:
    metadata: {labels: {app: burn}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: burn
        image: "busybox:1.36"
        command: [sh, -c, "while :; do :; done"]
        resources:
          requests: {cpu: 100m}
          limits: {cpu: 200m}
`

// TestHorizontalPodAutoscalerOnRealNode: `kubectl autoscale` of a
// CPU-bound Deployment on a real node. Upstream's autoscaler reads the pod's
// usage from the API server's metrics.k8s.io (the nodelet's stats), sees
// it far above the 50% target and scales the Deployment to maxReplicas;
// kubectl get hpa shows the measured utilization, both API versions read
// the same object, and the rescale is an event.
func TestHorizontalPodAutoscalerOnRealNode(t *testing.T) {
	cp := startControlPlane(t, t.TempDir(), freePort(t), "--horizontal-pod-autoscaler-sync-period=2s")
	node := startRealNode(t, cp, "node-hpa")
	testkit.Eventually(t, 60*time.Second, "node Ready", func() bool {
		out, _, _ := cp.kubectl("get", "node", node.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True"
	})
	cp.mustStdin(burnManifest, "apply", "-f", "-")
	cp.must("rollout", "status", "deployment/burn", "--timeout=120s")
	cp.must("autoscale", "deployment", "burn", "--cpu-percent=50", "--min=1", "--max=3")

	testkit.Eventually(t, 120*time.Second, "three ready replicas", func() bool {
		out, _, _ := cp.kubectl("get", "deployment", "burn", "-o", "jsonpath={.spec.replicas} {.status.readyReplicas}")
		return out == "3 3"
	})
	// kubectl get hpa: REFERENCE, TARGETS "cpu: N%/50%" with N over the
	// target, MINPODS 1, MAXPODS 3, REPLICAS 3.
	var row []string
	testkit.Eventually(t, 60*time.Second, "kubectl get hpa with the measured utilization", func() bool {
		out, _, _ := cp.kubectl("get", "hpa", "burn", "--no-headers")
		row = strings.Fields(out)
		return len(row) == 8 && row[4] == "1" && row[5] == "3" && row[6] == "3"
	})
	if row[1] != "Deployment/burn" || row[2] != "cpu:" || !strings.HasSuffix(row[3], "%/50%") {
		t.Fatalf("kubectl get hpa burn: %q", row)
	}
	if used, err := strconv.Atoi(strings.TrimSuffix(row[3], "%/50%")); err != nil || used <= 50 {
		t.Errorf("measured utilization %q, want over the 50%% target", row[3])
	}
	if v1 := cp.must("get", "horizontalpodautoscalers.v1.autoscaling", "burn", "-o", "jsonpath={.spec.targetCPUUtilizationPercentage} {.status.currentReplicas}"); v1 != "50 3" {
		t.Errorf("autoscaling/v1 view: %q, want target 50 and 3 replicas", v1)
	}
	events := cp.must("get", "events", "--field-selector", "reason=SuccessfulRescale,involvedObject.name=burn", "-o", "jsonpath={.items[*].message}")
	if !strings.Contains(events, "New size: 3") {
		t.Errorf("SuccessfulRescale events: %q", events)
	}
	cp.must("delete", "hpa", "burn")
	cp.must("delete", "deployment", "burn", "--wait=true", "--timeout=60s")
	// The node ends with nothing of the pods (their token volumes are
	// mounts): the Deployment's deletion only starts theirs.
	testkit.Eventually(t, 60*time.Second, "nothing of the pods left on the node", func() bool { return len(node.leftovers(t)) == 0 })
}
