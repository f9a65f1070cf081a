package scheduler_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/nodelet/nodelet/controlplane/controlplanetest"
	"github.com/nodelet/nodelet/controlplane/scheduler"
	"github.com/nodelet/nodelet/test/testkit"
)

// startScheduler runs a scheduler against cs until the test ends.
func startScheduler(tb testing.TB, cs kubernetes.Interface, rec record.EventRecorder) *scheduler.Scheduler {
	tb.Helper()
	if rec == nil {
		b := record.NewBroadcaster()
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
		tb.Cleanup(b.Shutdown)
		rec = b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "default-scheduler"})
	}
	factory := informers.NewSharedInformerFactory(cs, 0)
	s, err := scheduler.New(scheduler.Config{
		Client: cs, Informers: factory, Recorder: rec,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Error(err)
		}
		factory.Shutdown()
	})
	return s
}

func testNode(name, cpu, mem string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem),
				corev1.ResourcePods: resource.MustParse("110"),
			},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
}

func testPod(name, cpu string, owner types.UID) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("64Mi")}}}}},
	}
	if owner != "" {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: owner, Controller: &yes}}
	}
	return p
}

func createNodes(t *testing.T, cs kubernetes.Interface, nodes ...*corev1.Node) {
	t.Helper()
	for _, n := range nodes {
		if _, err := cs.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func createPods(t *testing.T, cs kubernetes.Interface, pods ...*corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		if _, err := cs.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// waitPod polls pod name until cond holds.
func waitPod(t *testing.T, cs kubernetes.Interface, name string, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	testkit.Eventually(t, 15*time.Second, "pod "+name+": "+what, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = p
		if cond(p) {
			return true, nil
		}
		return false, fmt.Errorf("node %q, conditions %+v", p.Spec.NodeName, p.Status.Conditions)
	})
	return last
}

func bound(p *corev1.Pod) bool { return p.Spec.NodeName != "" }

func unschedulableWith(msg string) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse &&
				c.Reason == corev1.PodReasonUnschedulable && strings.Contains(c.Message, msg) {
				return true
			}
		}
		return false
	}
}

func TestReplicaSetPodsSpreadAcrossNodes(t *testing.T) {
	srv := controlplanetest.Start(t, controlplanetest.Options{})
	cs := srv.Clientset(t)
	createNodes(t, cs, testNode("n1", "4", "8Gi"), testNode("n2", "4", "8Gi"), testNode("n3", "4", "8Gi"))
	startScheduler(t, cs, nil)
	owner := types.UID("3f0c2a4e-0000-4000-8000-000000000001")
	createPods(t, cs, testPod("web-a", "100m", owner), testPod("web-b", "100m", owner), testPod("web-c", "100m", owner))
	seen := map[string]string{}
	for _, name := range []string{"web-a", "web-b", "web-c"} {
		p := waitPod(t, cs, name, "binding", bound)
		if prev, dup := seen[p.Spec.NodeName]; dup {
			t.Errorf("%s and %s both on %s", prev, name, p.Spec.NodeName)
		}
		seen[p.Spec.NodeName] = name
		if !hasCondition(p, corev1.PodScheduled, corev1.ConditionTrue) {
			t.Errorf("%s: no PodScheduled=True condition: %+v", name, p.Status.Conditions)
		}
	}
}

func hasCondition(p *corev1.Pod, t corev1.PodConditionType, s corev1.ConditionStatus) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == t && c.Status == s {
			return true
		}
	}
	return false
}

func TestTooBigPodWaitsForBigNode(t *testing.T) {
	srv := controlplanetest.Start(t, controlplanetest.Options{})
	cs := srv.Clientset(t)
	createNodes(t, cs, testNode("small-1", "2", "4Gi"), testNode("small-2", "2", "4Gi"),
		testNode("tainted", "2", "4Gi", corev1.Taint{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoSchedule}))
	startScheduler(t, cs, nil)
	createPods(t, cs, testPod("big", "8", ""))
	const want = "0/3 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }, 2 Insufficient cpu."
	waitPod(t, cs, "big", "PodScheduled=False", unschedulableWith(want))
	waitEvent(t, cs, "big", "FailedScheduling", want)

	createNodes(t, cs, testNode("big-node", "16", "32Gi"))
	p := waitPod(t, cs, "big", "binding", bound)
	if p.Spec.NodeName != "big-node" {
		t.Fatalf("bound to %s, want big-node", p.Spec.NodeName)
	}
}

func waitEvent(t *testing.T, cs kubernetes.Interface, pod, reason, msg string) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("a %s event for %s with %q", reason, pod, msg), func(ctx context.Context) (bool, error) {
		evs, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == pod && e.Reason == reason && strings.Contains(e.Message, msg) {
				return true, nil
			}
		}
		return false, nil
	})
}

func TestTaintsRespected(t *testing.T) {
	srv := controlplanetest.Start(t, controlplanetest.Options{})
	cs := srv.Clientset(t)
	dedicated := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	createNodes(t, cs, testNode("gpu-1", "8", "8Gi", dedicated), testNode("gpu-2", "8", "8Gi", dedicated),
		testNode("plain", "8", "8Gi"))
	startScheduler(t, cs, nil)
	var pods []*corev1.Pod
	for i := range 4 {
		pods = append(pods, testPod(fmt.Sprintf("plain-%d", i), "100m", "owner-1"))
	}
	tolerating := testPod("gpu-job", "100m", "")
	tolerating.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	tolerating.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "gpu-2"}
	createPods(t, cs, append(pods, tolerating)...)
	for _, p := range pods {
		if got := waitPod(t, cs, p.Name, "binding", bound); got.Spec.NodeName != "plain" {
			t.Errorf("%s bound to tainted node %s", p.Name, got.Spec.NodeName)
		}
	}
	if got := waitPod(t, cs, "gpu-job", "binding", bound); got.Spec.NodeName != "gpu-2" {
		t.Errorf("gpu-job bound to %s, want gpu-2", got.Spec.NodeName)
	}
}
