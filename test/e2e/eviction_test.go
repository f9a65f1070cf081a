package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/cgroups"
	"github.com/nodelet/nodelet/eviction"
	"github.com/nodelet/nodelet/test/testkit"
)

// hogBytes is what the BestEffort pod holds: hogTails busybox tails, each
// buffering a line that never ends (one tail cannot hold more than 2 GiB:
// it fails with "out of memory" and the hog would be gone before the
// eviction manager's next pass). The threshold sits at half of it below
// what the host has, so the hog crosses it and its eviction uncrosses it,
// with 3 GiB of slack either way for whatever else the machine does.
const (
	hogTails = 8
	hogBytes = hogTails * 768 << 20
)

// TestEvictionOnRealNode runs the real nodelet with a memory.available
// hard threshold set relative to what this machine has: a BestEffort pod
// that eats memory is evicted (Failed, Evicted, upstream's message, a
// DisruptionTarget condition) while the Guaranteed pod keeps running; the
// node reports MemoryPressure (held by the transition period once the
// memory is back), the control plane taints it memory-pressure:NoSchedule,
// and a new BestEffort pod bound to it is refused while a Burstable one
// is admitted.
func TestEvictionOnRealNode(t *testing.T) {
	pc, err := eviction.DetectCgroups(cgroups.DriverCgroupfs, "/")
	if err != nil {
		t.Fatal(err)
	}
	obs, err := eviction.Host{V2: pc.V2, MemoryRoot: pc.MemoryRoot}.Observe()
	avail := obs[eviction.MemoryAvailable].Available
	if avail < 2*hogBytes {
		t.Skipf("%d MiB available: too little to hog %d MiB safely (%v)", avail>>20, hogBytes>>20, err)
	}
	threshold := (avail - hogBytes/2) >> 20
	t.Logf("memory.available %d MiB, threshold %d MiB", avail>>20, threshold)

	cp := startControlPlane(t, t.TempDir(), freePort(t))
	node := startRealNode(t, cp, "node-evict", fmt.Sprintf("--eviction-hard=memory.available<%dMi", threshold),
		"--eviction-pressure-transition-period=5m", "--eviction-max-pod-grace-period=5")
	testkit.Eventually(t, 60*time.Second, "node Ready", func() bool {
		out, _, _ := cp.kubectl("get", "node", node.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True"
	})
	if got := nodeCondition(cp, node.name, "MemoryPressure"); got != "False" {
		t.Fatalf("MemoryPressure before the hog: %q", got)
	}
	cp.mustStdin(guaranteedPod, "apply", "-f", "-")
	cp.must("wait", "--for=condition=Ready", "pod/guaranteed", "--timeout=60s")
	cp.must("run", "hog", "--image=busybox:1.36", "--image-pull-policy=IfNotPresent", "--restart=Never", "--",
		"sh", "-c", fmt.Sprintf("for i in $(seq %d); do (head -c %d /dev/zero; sleep 3600) | tail & done; wait", hogTails, hogBytes/hogTails))

	testkit.Eventually(t, 90*time.Second, "the hog evicted", func() bool {
		out, _, _ := cp.kubectl("get", "pod", "hog", "-o", "jsonpath={.status.phase}/{.status.reason}")
		return out == "Failed/Evicted"
	})
	msg := cp.must("get", "pod", "hog", "-o", "jsonpath={.status.message}")
	if !strings.HasPrefix(msg, fmt.Sprintf("The node was low on resource: memory. Threshold quantity: %dMi, available: ", threshold)) {
		t.Errorf("eviction message %q", msg)
	}
	cond := cp.must("get", "pod", "hog", "-o", `jsonpath={.status.conditions[?(@.type=="DisruptionTarget")].status}/{.status.conditions[?(@.type=="DisruptionTarget")].reason}`)
	if cond != "True/TerminationByKubelet" {
		t.Errorf("DisruptionTarget condition: %q", cond)
	}
	if out := cp.must("get", "events", "--field-selector", "involvedObject.name=hog,reason=Evicted", "-o", "name"); out == "" {
		t.Error("no Evicted event for the hog")
	}
	if got := nodeCondition(cp, node.name, "MemoryPressure"); got != "True" {
		t.Errorf("MemoryPressure after the eviction: %q", got)
	}
	testkit.Eventually(t, 60*time.Second, "the memory-pressure taint", func() bool {
		out, _, _ := cp.kubectl("get", "node", node.name, "-o", "jsonpath={.spec.taints}")
		return strings.Contains(out, `"key":"node.kubernetes.io/memory-pressure"`) && strings.Contains(out, `"effect":"NoSchedule"`)
	})

	// Bound to the node directly: the scheduler would keep them off the
	// tainted node, admission is what is tested.
	cp.mustStdin(boundPod("late-besteffort", node.name, ""), "apply", "-f", "-")
	cp.mustStdin(boundPod("late-burstable", node.name, "resources: {requests: {memory: 16Mi}}"), "apply", "-f", "-")
	testkit.Eventually(t, 60*time.Second, "the new BestEffort pod refused", func() bool {
		out, _, _ := cp.kubectl("get", "pod", "late-besteffort", "-o", "jsonpath={.status.phase}/{.status.reason}/{.status.message}")
		return out == "Failed/Evicted/The node had condition: [MemoryPressure]. "
	})
	cp.must("wait", "--for=condition=Ready", "pod/late-burstable", "--timeout=60s")

	// Two more passes with the memory back: nothing else goes, and the
	// transition period holds the condition.
	time.Sleep(25 * time.Second)
	if out := cp.must("get", "pod", "guaranteed", "-o", "jsonpath={.status.phase}/{.status.reason}"); out != "Running/" {
		t.Errorf("the Guaranteed pod: %q, want Running", out)
	}
	if got := nodeCondition(cp, node.name, "MemoryPressure"); got != "True" {
		t.Errorf("MemoryPressure within the transition period: %q", got)
	}
	if t.Failed() {
		t.Logf("pods:\n%s", cp.must("get", "pods", "-o", "wide"))
	}

	cp.must("delete", "pods", "--all", "--grace-period=0", "--wait=false")
	testkit.Eventually(t, 90*time.Second, "no pods", func() bool {
		out, _, _ := cp.kubectl("get", "pods", "-o", "name")
		return strings.TrimSpace(out) == ""
	})
	waitNoLeftovers(t, node)
}

func nodeCondition(cp *controlPlane, node, typ string) string {
	out, _, _ := cp.kubectl("get", "node", node, "-o", fmt.Sprintf(`jsonpath={.status.conditions[?(@.type==%q)].status}`, typ))
	return out
}

const guaranteedPod = `apiVersion: v1
kind: Pod
metadata: {name: guaranteed}
spec:
  containers:
  - name: app
    image: busybox:1.36
    imagePullPolicy: IfNotPresent
    command: [sh, -c, "sleep 3600"]
    resources:
      requests: {cpu: 100m, memory: 64Mi}
      limits: {cpu: 100m, memory: 64Mi}
`

func boundPod(name, node, resources string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  nodeName: %s
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: busybox:1.36
    imagePullPolicy: IfNotPresent
    command: [sh, -c, "sleep 3600"]
    %s
`, name, node, resources)
}
