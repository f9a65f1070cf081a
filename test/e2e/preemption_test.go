package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodelet/nodelet/controlplane/scheduler"
)

// preemptionRequest is the CPU each pod of the preemption test requests:
// it fits once, not twice, in the one CPU the node has allocatable.
const preemptionRequest = "700m"

// preemptionNodeArgs are the nodelet flags that leave the node one CPU
// allocatable (900m on a one-CPU host): its capacity is the host's CPU
// count, and the harness already reserves 100m for the system
// (startRealNode).
func preemptionNodeArgs() []string {
	return []string{fmt.Sprintf("--kube-reserved=cpu=%dm", max(0, goruntime.NumCPU()*1000-1100))}
}

const priorityClasses = `apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: low}
value: 1000
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000000
`

// prioPod is a busybox pod of priorityClass requesting preemptionRequest
// CPU.
func prioPod(name, priorityClass string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  labels: {app: prio}
spec:
  priorityClassName: %s
  terminationGracePeriodSeconds: 1
  containers:
  - name: box
    image: busybox:1.36
    imagePullPolicy: Never
    command: [sleep, "3600"]
    resources: {requests: {cpu: %s}}
`, name, priorityClass, preemptionRequest)
}

// testPreemption: on node, whose allocatable CPU fits one of the two pods,
// a running low-priority pod is preempted by a high-priority one. A watch
// on both, started before them, sees the scheduler mark the low pod
// DisruptionTarget (PreemptionByScheduler) while it deletes it, nominate
// the node for the high pod, and bind the high pod only once the low pod
// has terminated (a terminal pod holds no resources, as upstream's
// scheduler counts them). The high pod runs on the node, the low pod is
// gone, and it has a Preempted event naming the preemptor and the node.
func testPreemption(t *testing.T, cp *controlPlane, node string) {
	alloc, err := resource.ParseQuantity(cp.must("get", "node", node, "-o", "jsonpath={.status.allocatable.cpu}"))
	if req := resource.MustParse(preemptionRequest); err != nil || alloc.Cmp(req) < 0 || alloc.MilliValue() >= 2*req.MilliValue() {
		t.Fatalf("node %s allocatable cpu %s (%v): want room for one %s request, not two (flags %v)", node, alloc.String(), err, preemptionRequest, preemptionNodeArgs())
	}
	cp.mustStdin(priorityClasses, "apply", "-f", "-")
	defer cp.kubectl("delete", "priorityclass", "low", "high", "--ignore-not-found")
	w, err := cp.clientset().CoreV1().Pods("default").Watch(context.Background(), metav1.ListOptions{LabelSelector: "app=prio"})
	if err != nil {
		t.Fatalf("watch pods: %v", err)
	}
	defer w.Stop()
	defer cp.kubectl("delete", "pod", "low", "high", "--ignore-not-found", "--wait=false") // when failing
	cp.mustStdin(prioPod("low", "low"), "apply", "-f", "-")
	cp.must("wait", "--for=condition=Ready", "pod/low", "--timeout=60s")
	low := getPod(t, cp.clientset(), "low")
	cp.mustStdin(prioPod("high", "high"), "apply", "-f", "-")
	cp.must("wait", "--for=condition=Ready", "pod/high", "--timeout=90s")
	high := getPod(t, cp.clientset(), "high")
	if high.Spec.NodeName != node || high.Status.Phase != corev1.PodRunning {
		t.Fatalf("pod high: node %q phase %s, want Running on %s", high.Spec.NodeName, high.Status.Phase, node)
	}

	// What the watch saw, in the store's order.
	var marked, deleting, lowDone, nominated, bound int // event numbers, 0: never
	var seen []string
	for i := 1; bound == 0; i++ {
		var ev watch.Event
		select {
		case ev = <-w.ResultChan():
		case <-time.After(10 * time.Second):
			t.Fatalf("the watch did not show pod high bound; saw:\n%s", strings.Join(seen, "\n"))
		}
		p, ok := ev.Object.(*corev1.Pod)
		if !ok {
			t.Fatalf("pod watch: %v %T", ev.Type, ev.Object)
		}
		seen = append(seen, fmt.Sprintf("%d %s %s node=%q nominated=%q phase=%s deleting=%v conditions=%v",
			i, ev.Type, p.Name, p.Spec.NodeName, p.Status.NominatedNodeName, p.Status.Phase, p.DeletionTimestamp != nil, p.Status.Conditions))
		switch {
		case p.UID == low.UID:
			if marked == 0 && disruptionTarget(p) == scheduler.ReasonPreemptionByScheduler {
				marked = i
			}
			if deleting == 0 && p.DeletionTimestamp != nil {
				deleting = i
			}
			if lowDone == 0 && (ev.Type == watch.Deleted || p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded) {
				lowDone = i
			}
		case p.UID == high.UID && p.Spec.NodeName != "":
			bound = i
		case p.UID == high.UID && p.Status.NominatedNodeName == node && nominated == 0:
			nominated = i
		}
	}
	if marked == 0 || deleting == 0 || lowDone == 0 || nominated == 0 || marked > lowDone || deleting > lowDone || lowDone > bound || nominated > bound {
		t.Fatalf("want low marked DisruptionTarget/%s (event %d) and deleted (%d) before it terminates (%d), high nominated to %s (%d) and bound only after both (%d); the watch saw:\n%s",
			scheduler.ReasonPreemptionByScheduler, marked, deleting, lowDone, node, nominated, bound, strings.Join(seen, "\n"))
	}
	cp.must("wait", "--for=delete", "pod/low", "--timeout=60s")

	var events corev1.EventList
	if err := json.Unmarshal([]byte(cp.must("get", "events", "--field-selector", "involvedObject.name=low,reason=Preempted", "-o", "json")), &events); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("Preempted by pod %s on node %s", high.UID, node)
	if len(events.Items) != 1 || events.Items[0].Message != want || events.Items[0].InvolvedObject.UID != low.UID {
		t.Fatalf("Preempted events of pod low: %+v, want one: %q", events.Items, want)
	}
	cp.must("delete", "pod", "high", "--wait=true", "--timeout=60s")
}

// disruptionTarget is the reason of p's DisruptionTarget condition when
// it is True.
func disruptionTarget(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return c.Reason
		}
	}
	return ""
}
