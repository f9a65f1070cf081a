package podgc

import (
	"context"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/nodelet/nodelet/controlplane/controlplanetest"
	"github.com/nodelet/nodelet/test/testkit"
)

const (
	testPeriod     = 100 * time.Millisecond
	testQuarantine = 1500 * time.Millisecond
	holdFinalizer  = "example.com/hold"
)

func startServer(t *testing.T) kubernetes.Interface {
	t.Helper()
	return controlplanetest.Start(t, controlplanetest.Options{}).Clientset(t)
}

// startGC runs the collector against cs until the test ends.
func startGC(t *testing.T, cs kubernetes.Interface, threshold int) {
	t.Helper()
	factory := informers.NewSharedInformerFactory(cs, 0)
	c, err := New(Config{Client: cs, Informers: factory, TerminatedPodThreshold: threshold,
		Period: testPeriod, Quarantine: testQuarantine, Log: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		factory.Shutdown()
	})
}

func createPod(t *testing.T, cs kubernetes.Interface, name, nodeName string, finalizers ...string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: finalizers},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	out, err := cs.CoreV1().Pods("default").Create(t.Context(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
	return out
}

func setPhase(t *testing.T, cs kubernetes.Interface, p *corev1.Pod, ph corev1.PodPhase) {
	t.Helper()
	p.Status.Phase = ph
	if _, err := cs.CoreV1().Pods(p.Namespace).UpdateStatus(t.Context(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("set phase of %s: %v", p.Name, err)
	}
}

func removeFinalizers(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	_, err := cs.CoreV1().Pods("default").Patch(t.Context(), name, types.MergePatchType,
		[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("remove finalizers of %s: %v", name, err)
	}
}

func gone(cs kubernetes.Interface, name string) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}
}

func TestOrphanedPodsCollectedAfterQuarantine(t *testing.T) {
	cs := startServer(t)
	if _, err := cs.CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "real"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createPod(t, cs, "orphan", "ghost")
	createPod(t, cs, "held-orphan", "ghost", holdFinalizer) // stays to show its status
	createPod(t, cs, "kept", "real")
	start := time.Now()
	startGC(t, cs, 0)

	testkit.Eventually(t, 20*time.Second, "orphan deleted", gone(cs, "orphan"))
	if d := time.Since(start); d < testQuarantine {
		t.Errorf("orphan deleted after %v, before the %v quarantine", d, testQuarantine)
	}
	testkit.Eventually(t, 20*time.Second, "held orphan failed and terminating", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "held-orphan", metav1.GetOptions{})
		return err == nil && p.DeletionTimestamp != nil, err
	})
	p, err := cs.CoreV1().Pods("default").Get(t.Context(), "held-orphan", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase != corev1.PodFailed {
		t.Errorf("held orphan phase %q, want Failed", p.Status.Phase)
	}
	if !hasCondition(p, corev1.DisruptionTarget, "DeletionByPodGC") {
		t.Errorf("held orphan conditions %+v, want DisruptionTarget/DeletionByPodGC", p.Status.Conditions)
	}
	removeFinalizers(t, cs, "held-orphan")
	testkit.Eventually(t, 20*time.Second, "held orphan deleted once released", gone(cs, "held-orphan"))
	// A few more passes: the pod on an existing node stays.
	time.Sleep(5 * testPeriod)
	if _, err := cs.CoreV1().Pods("default").Get(t.Context(), "kept", metav1.GetOptions{}); err != nil {
		t.Errorf("pod on an existing node: %v", err)
	}
}

func hasCondition(p *corev1.Pod, typ corev1.PodConditionType, reason string) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == typ && c.Status == corev1.ConditionTrue && c.Reason == reason {
			return true
		}
	}
	return false
}

func TestTerminatedPodsTrimmedOldestFirst(t *testing.T) {
	cs := startServer(t)
	// Creation timestamps have second precision: the "z" pods are a second
	// older than the "a" pods, so name order (the tie breaker) would pick
	// the wrong ones.
	var pods []*corev1.Pod
	for _, n := range []string{"z1", "z2"} {
		pods = append(pods, createPod(t, cs, n, ""))
	}
	time.Sleep(time.Until(pods[1].CreationTimestamp.Add(1100 * time.Millisecond)))
	for _, n := range []string{"a1", "a2"} {
		pods = append(pods, createPod(t, cs, n, ""))
	}
	if !pods[0].CreationTimestamp.Before(&pods[3].CreationTimestamp) {
		t.Fatalf("creation timestamps %v and %v do not differ", pods[0].CreationTimestamp, pods[3].CreationTimestamp)
	}
	createPod(t, cs, "running", "")
	for i, p := range pods {
		setPhase(t, cs, p, []corev1.PodPhase{corev1.PodSucceeded, corev1.PodFailed}[i%2])
	}
	startGC(t, cs, 2)

	testkit.Eventually(t, 20*time.Second, "z1 deleted", gone(cs, "z1"))
	testkit.Eventually(t, 20*time.Second, "z2 deleted", gone(cs, "z2"))
	time.Sleep(5 * testPeriod)
	for _, n := range []string{"a1", "a2", "running"} {
		if _, err := cs.CoreV1().Pods("default").Get(t.Context(), n, metav1.GetOptions{}); err != nil {
			t.Errorf("pod %s: %v", n, err)
		}
	}
}

// An unbound pod is deleted at once by the API server unless a finalizer
// holds it; the collector marks such a terminating pod Failed (so its
// owner, e.g. a Job's tracking finalizer, can let go) and force-deletes it.
func TestTerminatingUnscheduledPodCollected(t *testing.T) {
	cs := startServer(t)
	createPod(t, cs, "unbound", "", holdFinalizer)
	if err := cs.CoreV1().Pods("default").Delete(t.Context(), "unbound", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	startGC(t, cs, 0)
	testkit.Eventually(t, 20*time.Second, "unbound pod failed", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "unbound", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodFailed, err
	})
	removeFinalizers(t, cs, "unbound")
	testkit.Eventually(t, 20*time.Second, "unbound pod removed", gone(cs, "unbound"))
}

func TestTerminatingPodOnOutOfServiceNodeCollected(t *testing.T) {
	cs := startServer(t)
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "down"},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: corev1.TaintNodeOutOfService, Effect: corev1.TaintEffectNoExecute}}}}
	if _, err := cs.CoreV1().Nodes().Create(t.Context(), n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createPod(t, cs, "stuck", "down")
	createPod(t, cs, "alive", "down")
	// Bound and running: the delete only starts the grace period.
	if err := cs.CoreV1().Pods("default").Delete(t.Context(), "stuck", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods("default").Get(t.Context(), "stuck", metav1.GetOptions{}); err != nil {
		t.Fatalf("graceful delete removed the pod at once: %v", err)
	}
	startGC(t, cs, 0)
	testkit.Eventually(t, 20*time.Second, "terminating pod on out-of-service node deleted", gone(cs, "stuck"))
	time.Sleep(5 * testPeriod)
	if _, err := cs.CoreV1().Pods("default").Get(t.Context(), "alive", metav1.GetOptions{}); err != nil {
		t.Errorf("pod not terminating on the out-of-service node: %v", err)
	}
}
