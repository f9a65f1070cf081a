package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	runcoptions "github.com/containerd/containerd/api/types/runc/options"
	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/typeurl/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/hosttools"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/test/testkit"
)

// runtimeClasses: "alt" runs pods with the node's runc-alt handler, with
// an overhead and a nodeSelector; "kata" names a handler no node has.
const runtimeClasses = `
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: alt}
handler: runc-alt
overhead:
  podFixed: {cpu: 50m, memory: 20Mi}
scheduling:
  nodeSelector: {runtime: alt}
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: kata}
handler: kata
`

func runtimeClassPod(name, class string) string {
	return fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  runtimeClassName: %s
  terminationGracePeriodSeconds: 1
  containers:
  - {name: c, image: busybox:1.36, command: [sleep, "3600"]}
`, name, class)
}

// RuntimeClass end to end through the real kubectl: a pod of a class gets
// its overhead and nodeSelector (admission) and runs on the node with the
// class's handler, whose binary the shim of its sandbox and container is
// given; a pod of a missing class is refused; a pod whose class's handler
// the node lacks gets no sandbox and kubelet's FailedCreatePodSandBox
// event. runc-alt is the same runc as the default: crun, the obvious
// second runtime, refuses this host's hybrid cgroup layout, so what runs
// under another binary is not tested here, only the mapping.
func TestRuntimeClass(t *testing.T) {
	runc, err := hosttools.Path("runc")
	if err != nil {
		t.Fatal(err)
	}
	cp := startControlPlane(t, t.TempDir(), freePort(t))
	node := startRealNode(t, cp, "node-rtc", "--runtime-handlers", "runc-alt="+runc, "--node-labels", "runtime=alt")
	testkit.Eventually(t, 60*time.Second, "node Ready", func() bool {
		out, _, _ := cp.kubectl("get", "node", node.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True"
	})
	if out, errOut, err := cp.kubectlStdin(runtimeClasses, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply RuntimeClasses: %v\n%s%s", err, out, errOut)
	}
	if out := cp.must("get", "runtimeclasses"); !strings.Contains(out, "HANDLER") || !strings.Contains(out, "runc-alt") {
		t.Fatalf("kubectl get runtimeclasses:\n%s", out)
	}
	// The node reads RuntimeClasses through upstream's Node authorizer
	// (its NodeRules: get, list, watch).
	for _, verb := range []string{"get", "list", "watch"} {
		if out, _, _ := cp.kubectl("auth", "can-i", verb, "runtimeclasses.node.k8s.io",
			"--as", "system:node:"+node.name, "--as-group", "system:nodes"); strings.TrimSpace(out) != "yes" {
			t.Errorf("can node %s %s runtimeclasses: %q", node.name, verb, out)
		}
	}

	t.Run("overhead and handler", func(t *testing.T) {
		if out, errOut, err := cp.kubectlStdin(runtimeClassPod("alt-pod", "alt"), "apply", "-f", "-"); err != nil {
			t.Fatalf("apply pod: %v\n%s%s", err, out, errOut)
		}
		pod := waitPodRunning(t, cp, "alt-pod")
		if cpu, mem := pod.Spec.Overhead.Cpu().String(), pod.Spec.Overhead.Memory().String(); cpu != "50m" || mem != "20Mi" {
			t.Errorf("overhead cpu %s memory %s, want 50m 20Mi", cpu, mem)
		}
		if pod.Spec.NodeSelector["runtime"] != "alt" || pod.Spec.NodeName != node.name {
			t.Errorf("nodeSelector %v on node %q", pod.Spec.NodeSelector, pod.Spec.NodeName)
		}
		binaries := shimBinaries(t, node, pod.UID)
		if len(binaries) != 2 {
			t.Fatalf("containers of the pod: %v, want its sandbox and container", binaries)
		}
		for id, bin := range binaries {
			if bin != runc {
				t.Errorf("container %s runs with BinaryName %q, want %q", id, bin, runc)
			}
		}
	})

	t.Run("missing class", func(t *testing.T) {
		_, errOut, err := cp.kubectlStdin(runtimeClassPod("lost-pod", "missing"), "apply", "-f", "-")
		if err == nil || !strings.Contains(errOut, `pod rejected: RuntimeClass "missing" not found`) {
			t.Fatalf("pod of a missing class: %v, stderr %q", err, errOut)
		}
	})

	t.Run("unknown handler", func(t *testing.T) {
		if out, errOut, err := cp.kubectlStdin(runtimeClassPod("kata-pod", "kata"), "apply", "-f", "-"); err != nil {
			t.Fatalf("apply pod: %v\n%s%s", err, out, errOut)
		}
		var msg string
		testkit.Eventually(t, 60*time.Second, "FailedCreatePodSandBox for kata-pod", func() bool {
			msg, _, _ = cp.kubectl("get", "events", "--field-selector", "involvedObject.name=kata-pod,reason=FailedCreatePodSandBox",
				"-o", "jsonpath={.items[*].message}")
			return msg != ""
		})
		t.Logf("event: %s", msg)
		if !strings.Contains(msg, "Failed to create pod sandbox: ") || !strings.Contains(msg, `no runtime for "kata" is configured`) {
			t.Errorf("event message %q", msg)
		}
		pod := kubectlPod(t, cp, "kata-pod")
		if pod.Status.Phase != corev1.PodPending || len(pod.Status.ContainerStatuses) != 1 ||
			pod.Status.ContainerStatuses[0].State.Waiting == nil || pod.Status.ContainerStatuses[0].State.Waiting.Reason != "ContainerCreating" {
			t.Errorf("pod status %+v, want Pending in ContainerCreating", pod.Status)
		}
		if got := shimBinaries(t, node, pod.UID); len(got) > 0 {
			t.Errorf("the node created containers %v for a pod of an unknown handler", got)
		}
	})

	cp.must("delete", "pod", "alt-pod", "kata-pod", "--wait=true", "--timeout=90s")
	waitNoLeftovers(t, node)
}

func kubectlPod(t *testing.T, cp *controlPlane, name string) corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	if err := json.Unmarshal([]byte(cp.must("get", "pod", name, "-o", "json")), &pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

func waitPodRunning(t *testing.T, cp *controlPlane, name string) corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	testkit.Eventually(t, 90*time.Second, name+" running", func() bool {
		pod = kubectlPod(t, cp, name)
		return pod.Status.Phase == corev1.PodRunning
	})
	return pod
}

// shimBinaries maps the containerd containers of the pod (its sandboxes
// and containers) to the BinaryName of their runc shim options ("" for
// the shim's default).
func shimBinaries(t *testing.T, node *realNode, uid types.UID) map[string]string {
	t.Helper()
	client, err := containerd.New(node.ctdAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx := namespaces.WithNamespace(context.Background(), e2eNamespace)
	list, err := client.Containers(ctx, fmt.Sprintf("labels.%q==%s", runtime.LabelPodUID, uid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, c := range list {
		info, err := c.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out[c.ID()] = ""
		if info.Runtime.Options == nil {
			continue
		}
		v, err := typeurl.UnmarshalAny(info.Runtime.Options)
		if err != nil {
			t.Fatalf("runtime options of %s: %v", c.ID(), err)
		}
		if opts, ok := v.(*runcoptions.Options); ok {
			out[c.ID()] = opts.BinaryName
		}
	}
	return out
}
