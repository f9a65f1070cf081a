package nodelifecycle

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/controlplane/controlplanetest"
	"github.com/nodelet/nodelet/test/testkit"
)

// harness drives a controller on a fake clock against the real API
// server, playing the kubelet of node "good" (which keeps renewing its
// lease) and of node "bad" (which stops when told).
type harness struct {
	t      *testing.T
	cs     kubernetes.Interface
	clock  *clocktesting.FakeClock
	c      *Controller
	passes chan struct{}
}

func newHarness(t *testing.T) *harness {
	srv := controlplanetest.Start(t, controlplanetest.Options{Admission: controlplanetest.AdmissionWith("DefaultTolerationSeconds")})
	cs := srv.Clientset(t)
	h := &harness{t: t, cs: cs, clock: clocktesting.NewFakeClock(time.Now().Truncate(time.Second)), passes: make(chan struct{}, 1000)}
	for _, n := range []string{"good", "bad"} {
		h.createNode(n)
	}
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	rec := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "node-controller"})
	f := informers.NewSharedInformerFactory(cs, 0)
	c, err := New(Config{Client: cs, Informers: f, Recorder: rec, Clock: h.clock,
		Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	c.afterPass = func() { h.passes <- struct{}{} }
	h.c = c
	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, 2) }()
	t.Cleanup(func() {
		cancel()
		<-done
		f.Shutdown()
		b.Shutdown()
	})
	h.waitPass()
	return h
}

func (h *harness) createNode(name string) {
	now := metav1.NewTime(h.clock.Now())
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now},
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: now, LastTransitionTime: now},
	}}}
	if _, err := h.cs.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	renew := metav1.NewMicroTime(h.clock.Now())
	lease := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceNodeLease},
		Spec: coordv1.LeaseSpec{HolderIdentity: &name, LeaseDurationSeconds: ptr.To(int32(40)), RenewTime: &renew}}
	if _, err := h.cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(context.Background(), lease, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) waitPass() {
	h.t.Helper()
	select {
	case <-h.passes:
	case <-time.After(10 * time.Second):
		h.t.Fatal("no monitor pass")
	}
}

// renew renews node's lease at the fake time and waits until the
// controller's cache has it, so the next pass cannot miss it.
func (h *harness) renew(node string) {
	h.t.Helper()
	ctx := context.Background()
	leases := h.cs.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	l, err := leases.Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	renew := metav1.NewMicroTime(h.clock.Now())
	l.Spec.RenewTime = &renew
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	testkit.Eventually(h.t, 10*time.Second, "lease "+node+" in cache", func() bool {
		return !h.c.leaseRenewTime(node).Before(renew.Time)
	})
}

// tick advances the fake clock one monitor period with "good" renewing
// (and "bad" too if badAlive) and waits for the pass.
func (h *harness) tick(badAlive bool) {
	h.t.Helper()
	h.renew("good")
	if badAlive {
		h.renew("bad")
	}
	h.clock.Step(DefaultMonitorPeriod)
	h.waitPass()
}

func (h *harness) node(name string) *corev1.Node {
	h.t.Helper()
	n, err := h.cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

func (h *harness) pod(name string) *corev1.Pod {
	h.t.Helper()
	p, err := h.cs.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

// makePod creates a ready pod on node with the given tolerations; the API
// server adds the default 300 s not-ready/unreachable tolerations the pod
// does not already have.
func (h *harness) makePod(name, node string, tols ...corev1.Toleration) {
	h.t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: node, Tolerations: tols, Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}
	p, err := h.cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if _, err := h.cs.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

func unreachableToleration(secs *int64) corev1.Toleration {
	return corev1.Toleration{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists,
		Effect: corev1.TaintEffectNoExecute, TolerationSeconds: secs}
}

func findTaint(n *corev1.Node, key string, effect corev1.TaintEffect) *corev1.Taint {
	for i := range n.Spec.Taints {
		if n.Spec.Taints[i].Key == key && n.Spec.Taints[i].Effect == effect {
			return &n.Spec.Taints[i]
		}
	}
	return nil
}

func podReady(p *corev1.Pod) bool {
	i := podConditionIndex(p.Status.Conditions, corev1.PodReady)
	return i >= 0 && p.Status.Conditions[i].Status == corev1.ConditionTrue
}

func TestSilentNodeIsTaintedAndItsPodsEvicted(t *testing.T) {
	h := newHarness(t)
	h.makePod("zero", "bad", unreachableToleration(ptr.To(int64(0))))
	h.makePod("default", "bad")
	h.makePod("forever", "bad", unreachableToleration(nil))
	h.makePod("elsewhere", "good")
	if tol := h.pod("default").Spec.Tolerations; len(tol) != 2 || tol[1].TolerationSeconds == nil || *tol[1].TolerationSeconds != 300 {
		t.Fatalf("default tolerations not added by the API server: %+v", tol)
	}

	// Both nodes renew: nothing happens.
	for i := 0; i < 12; i++ {
		h.tick(true)
	}
	if n := h.node("bad"); findCondition(n.Status.Conditions, corev1.NodeReady).Status != corev1.ConditionTrue || len(n.Spec.Taints) != 0 {
		t.Fatalf("renewing node changed: %+v", n.Status.Conditions)
	}

	// "bad" goes silent: Unknown after the 50 s grace period, not before.
	silentSince := h.clock.Now()
	var ticks int
	for ; findCondition(h.node("bad").Status.Conditions, corev1.NodeReady).Status == corev1.ConditionTrue; ticks++ {
		if ticks > 20 {
			t.Fatal("node never became Unknown")
		}
		h.tick(false)
	}
	if elapsed := h.clock.Since(silentSince); elapsed <= DefaultGracePeriod || elapsed > DefaultGracePeriod+DefaultMonitorPeriod {
		t.Fatalf("became Unknown after %v", elapsed)
	}
	bad := h.node("bad")
	for _, ty := range kubeletConditions {
		c := findCondition(bad.Status.Conditions, ty)
		if c == nil || c.Status != corev1.ConditionUnknown {
			t.Fatalf("%s not Unknown: %+v", ty, c)
		}
	}
	if r := findCondition(bad.Status.Conditions, corev1.NodeReady); r.Reason != reasonNodeStatusUnknown || r.Message != msgStoppedPosting {
		t.Fatalf("ready condition %+v", r)
	}
	taint := findTaint(bad, corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute)
	if taint == nil || taint.TimeAdded == nil || !taint.TimeAdded.Time.Equal(h.clock.Now()) {
		t.Fatalf("unreachable NoExecute taint: %+v", bad.Spec.Taints)
	}
	taintedAt := taint.TimeAdded.Time
	if n := h.node("good"); findCondition(n.Status.Conditions, corev1.NodeReady).Status != corev1.ConditionTrue || len(n.Spec.Taints) != 0 {
		t.Fatalf("good node changed: %+v %+v", n.Status.Conditions, n.Spec.Taints)
	}
	testkit.Eventually(h.t, 10*time.Second, "NoSchedule unreachable taint", func() bool {
		return findTaint(h.node("bad"), corev1.TaintNodeUnreachable, corev1.TaintEffectNoSchedule) != nil
	})
	testkit.Eventually(h.t, 10*time.Second, "pods marked not ready", func() bool { return !podReady(h.pod("forever")) })
	if !podReady(h.pod("elsewhere")) {
		t.Fatal("pod on the good node marked not ready")
	}

	// tolerationSeconds 0: evicted at once, with DisruptionTarget.
	testkit.Eventually(h.t, 10*time.Second, "zero evicted", func() bool { return h.pod("zero").DeletionTimestamp != nil })
	if i := podConditionIndex(h.pod("zero").Status.Conditions, corev1.DisruptionTarget); i < 0 {
		t.Fatal("no DisruptionTarget condition")
	}
	// Default 300 s: not at 295 s, then at 300 s.
	for h.clock.Now().Before(taintedAt.Add(295 * time.Second)) {
		h.tick(false)
	}
	time.Sleep(50 * time.Millisecond)
	if h.pod("default").DeletionTimestamp != nil {
		t.Fatalf("default pod evicted early at %v", h.clock.Since(taintedAt))
	}
	h.tick(false)
	testkit.Eventually(h.t, 10*time.Second, "default evicted", func() bool { return h.pod("default").DeletionTimestamp != nil })
	if h.pod("forever").DeletionTimestamp != nil || h.pod("elsewhere").DeletionTimestamp != nil {
		t.Fatal("pod tolerating forever or on the good node evicted")
	}

	// The kubelet comes back: lease and Ready status. The taints go.
	bad = h.node("bad")
	now := metav1.NewTime(h.clock.Now())
	for i := range bad.Status.Conditions {
		c := &bad.Status.Conditions[i]
		c.LastHeartbeatTime, c.LastTransitionTime, c.Reason, c.Message = now, now, "KubeletReady", ""
		c.Status = corev1.ConditionFalse
		if c.Type == corev1.NodeReady {
			c.Status = corev1.ConditionTrue
		}
	}
	if _, err := h.cs.CoreV1().Nodes().UpdateStatus(context.Background(), bad, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(h.t, 10*time.Second, "ready status in cache", func() bool {
		n, err := h.c.nodes.Get("bad")
		return err == nil && findCondition(n.Status.Conditions, corev1.NodeReady).Status == corev1.ConditionTrue
	})
	h.tick(true)
	testkit.Eventually(h.t, 10*time.Second, "taints removed", func() bool { return len(h.node("bad").Spec.Taints) == 0 })
	h.tick(true)
	if r := findCondition(h.node("bad").Status.Conditions, corev1.NodeReady); r.Status != corev1.ConditionTrue {
		t.Fatalf("recovered node not ready: %+v", r)
	}
	h.pollEvent("bad", ReasonNodeNotReady)
	h.pollEvent("default", ReasonTaintManagerEviction)
}

func (h *harness) pollEvent(name, reason string) {
	h.t.Helper()
	testkit.Eventually(h.t, 10*time.Second, reason+" event for "+name, func() bool {
		evs, err := h.cs.CoreV1().Events("").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == name && e.Reason == reason {
				return true
			}
		}
		return false
	})
}

// When no node is ready the controller cannot tell its own isolation from
// the nodes': conditions go Unknown but nothing is tainted or evicted.
func TestAllNodesSilentMeansNoEviction(t *testing.T) {
	h := newHarness(t)
	h.makePod("p", "bad")
	for findCondition(h.node("good").Status.Conditions, corev1.NodeReady).Status == corev1.ConditionTrue {
		h.clock.Step(DefaultMonitorPeriod)
		h.waitPass()
	}
	h.clock.Step(DefaultMonitorPeriod)
	h.waitPass()
	for _, n := range []string{"good", "bad"} {
		node := h.node(n)
		if findCondition(node.Status.Conditions, corev1.NodeReady).Status != corev1.ConditionUnknown {
			t.Fatalf("%s not Unknown", n)
		}
		if findTaint(node, corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute) != nil {
			t.Fatalf("%s tainted NoExecute in full disruption", n)
		}
	}
	if h.pod("p").DeletionTimestamp != nil {
		t.Fatal("pod evicted in full disruption")
	}
}
