package replicaset

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/nodelet/nodelet/controlplane/controlplanetest"
)

const ns = "default"

// startRS starts an API server and the ReplicaSet controller, stopped at the
// end of the test.
func startRS(t *testing.T) kubernetes.Interface {
	t.Helper()
	srv := controlplanetest.Start(t, controlplanetest.Options{})
	cs := srv.Clientset(t)
	ctx, cancel := context.WithCancel(context.Background())
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	rec := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "replicaset-controller"})
	f := informers.NewSharedInformerFactory(cs, 0)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := New(Config{Client: cs, Informers: f, Recorder: rec, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = c.Run(ctx, 2) }()
	t.Cleanup(func() { cancel(); wg.Wait(); f.Shutdown(); b.Shutdown() })
	return cs
}

func newRS(name string, n int32) *appsv1.ReplicaSet {
	l := map[string]string{"app": name}
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: &n,
			Selector: &metav1.LabelSelector{MatchLabels: l},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: l},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1"}}},
			},
		},
	}
}

// eventually polls cond every 20ms until it holds or 15s pass.
func eventually(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok {
			return
		}
		last = err
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s (last error: %v)", what, last)
}

func listPods(t *testing.T, cs kubernetes.Interface, sel string) []corev1.Pod {
	t.Helper()
	l, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// markReady makes every listed pod Running and Ready, as a kubelet would.
func markReady(t *testing.T, cs kubernetes.Interface, pods []corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
		if _, err := cs.CoreV1().Pods(ns).UpdateStatus(context.Background(), &p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func waitStatus(t *testing.T, cs kubernetes.Interface, name string, want func(appsv1.ReplicaSetStatus) bool) {
	t.Helper()
	eventually(t, "replicaset status of "+name, func() (bool, error) {
		rs, err := cs.AppsV1().ReplicaSets(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if want(rs.Status) && rs.Status.ObservedGeneration == rs.Generation {
			return true, nil
		}
		return false, fmt.Errorf("status %+v", rs.Status)
	})
}

// countCreates watches pods and counts ADDED events until stopped.
func countCreates(t *testing.T, cs kubernetes.Interface, sel string) (stop func() int) {
	t.Helper()
	w, err := cs.CoreV1().Pods(ns).Watch(context.Background(), metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	n := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if ev.Type == watch.Added {
				mu.Lock()
				n++
				mu.Unlock()
			}
		}
	}()
	return func() int {
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}

func TestCreatesPodsAndReportsStatus(t *testing.T) {
	cs := startRS(t)
	ctx := context.Background()
	rs, err := cs.AppsV1().ReplicaSets(ns).Create(ctx, newRS("web", 3), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, cs, "web", func(s appsv1.ReplicaSetStatus) bool { return s.Replicas == 3 && s.FullyLabeledReplicas == 3 })
	pods := listPods(t, cs, "app=web")
	if len(pods) != 3 {
		t.Fatalf("%d pods", len(pods))
	}
	for _, p := range pods {
		ref := metav1.GetControllerOf(&p)
		if ref == nil || ref.UID != rs.UID || ref.Kind != "ReplicaSet" || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
			t.Fatalf("pod %s owner refs %+v", p.Name, p.OwnerReferences)
		}
		if len(p.Name) != len("web-")+5 || p.Name[:4] != "web-" {
			t.Fatalf("pod name %q", p.Name)
		}
	}
	markReady(t, cs, pods)
	waitStatus(t, cs, "web", func(s appsv1.ReplicaSetStatus) bool { return s.ReadyReplicas == 3 && s.AvailableReplicas == 3 })

	evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created := 0
	for _, e := range evs.Items {
		if e.Reason == "SuccessfulCreate" && e.InvolvedObject.Name == "web" {
			created += int(max(e.Count, 1))
		}
	}
	if created != 3 {
		t.Errorf("%d SuccessfulCreate events, want 3", created)
	}
}

// TestDeletedPodsRecreatedOnce checks expectations: deleting pods makes the
// controller create exactly as many replacements, never more.
func TestDeletedPodsRecreatedOnce(t *testing.T) {
	cs := startRS(t)
	ctx := context.Background()
	if _, err := cs.AppsV1().ReplicaSets(ns).Create(ctx, newRS("web", 5), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, cs, "web", func(s appsv1.ReplicaSetStatus) bool { return s.Replicas == 5 })
	stop := countCreates(t, cs, "app=web")
	pods := listPods(t, cs, "app=web")
	for _, p := range pods[:3] {
		if err := cs.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitStatus(t, cs, "web", func(s appsv1.ReplicaSetStatus) bool { return s.Replicas == 5 })
	time.Sleep(500 * time.Millisecond) // give a double-create the time to show
	if n := len(listPods(t, cs, "app=web")); n != 5 {
		t.Fatalf("%d pods, want 5", n)
	}
	// The watch replays the 5 existing pods as ADDED, then the 3 replacements.
	if n := stop(); n != 8 {
		t.Fatalf("%d pod additions, want 5 existing + 3 replacements", n)
	}
}

func TestScaleDownPrefersNotReady(t *testing.T) {
	cs := startRS(t)
	ctx := context.Background()
	if _, err := cs.AppsV1().ReplicaSets(ns).Create(ctx, newRS("web", 4), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, cs, "web", func(s appsv1.ReplicaSetStatus) bool { return s.Replicas == 4 })
	pods := listPods(t, cs, "app=web")
	markReady(t, cs, pods[:2])
	waitStatus(t, cs, "web", func(s appsv1.ReplicaSetStatus) bool { return s.ReadyReplicas == 2 })
	scale(t, cs, "web", 2)
	waitStatus(t, cs, "web", func(s appsv1.ReplicaSetStatus) bool { return s.Replicas == 2 })
	left := listPods(t, cs, "app=web")
	got := map[string]bool{}
	for _, p := range left {
		got[p.Name] = true
	}
	if len(left) != 2 || !got[pods[0].Name] || !got[pods[1].Name] {
		t.Fatalf("left %v, want the ready %s and %s", left, pods[0].Name, pods[1].Name)
	}
	scale(t, cs, "web", 0)
	waitStatus(t, cs, "web", func(s appsv1.ReplicaSetStatus) bool { return s.Replicas == 0 })
}

func scale(t *testing.T, cs kubernetes.Interface, name string, n int32) {
	t.Helper()
	s, err := cs.AppsV1().ReplicaSets(ns).GetScale(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Spec.Replicas = n
	if _, err := cs.AppsV1().ReplicaSets(ns).UpdateScale(context.Background(), name, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestAdoptAndRelease(t *testing.T) {
	cs := startRS(t)
	ctx := context.Background()
	// An orphan that matches is adopted and counts towards replicas.
	orphan := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: ns, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1"}}}}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, orphan, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rs, err := cs.AppsV1().ReplicaSets(ns).Create(ctx, newRS("web", 2), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, cs, "web", func(s appsv1.ReplicaSetStatus) bool { return s.Replicas == 2 })
	p, err := cs.CoreV1().Pods(ns).Get(ctx, "orphan", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != rs.UID {
		t.Fatalf("orphan not adopted: %+v", p.OwnerReferences)
	}
	if n := len(listPods(t, cs, "app=web")); n != 2 {
		t.Fatalf("%d pods, want 2 (the adopted orphan and one new)", n)
	}
	// A pod relabelled out of the selector is released and replaced.
	p.Labels = map[string]string{"app": "debug"}
	if _, err := cs.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "release", func() (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "orphan", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return len(p.OwnerReferences) == 0, fmt.Errorf("owner refs %+v", p.OwnerReferences)
	})
	eventually(t, "replacement", func() (bool, error) {
		return len(listPods(t, cs, "app=web")) == 2, nil
	})
	waitStatus(t, cs, "web", func(s appsv1.ReplicaSetStatus) bool { return s.Replicas == 2 })
}
