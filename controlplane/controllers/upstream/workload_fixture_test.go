package upstream

import (
	"context"
	"fmt"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// fixture is one test case's namespace on a shared API server, so the
// cases of a test run in parallel without seeing each other's objects or
// events.
type fixture struct {
	t  *testing.T
	cs kubernetes.Interface
	ns string
}

func newFixture(t *testing.T, cs kubernetes.Interface, ns string) *fixture {
	t.Helper()
	n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if _, err := cs.CoreV1().Namespaces().Create(t.Context(), n, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
	return &fixture{t: t, cs: cs, ns: ns}
}

func (f *fixture) pods(app string) []corev1.Pod {
	f.t.Helper()
	l, err := f.cs.CoreV1().Pods(f.ns).List(f.t.Context(), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		f.t.Fatalf("list pods of %s: %v", app, err)
	}
	return l.Items
}

func (f *fixture) replicaSets(app string) []appsv1.ReplicaSet {
	f.t.Helper()
	l, err := f.cs.AppsV1().ReplicaSets(f.ns).List(f.t.Context(), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		f.t.Fatalf("list replicasets of %s: %v", app, err)
	}
	return l.Items
}

// markReady plays the nodelet: the pod is Running and Ready.
func (f *fixture) markReady(p corev1.Pod) { setStatus(f.t, f.cs, &p, corev1.PodRunning) }

// markAllReady marks every live, not yet ready pod of app ready.
func (f *fixture) markAllReady(app string) {
	for _, p := range f.pods(app) {
		if p.DeletionTimestamp == nil && !podReady(&p) {
			f.markReady(p)
		}
	}
}

// events counts the events of reason about the object named name.
func (f *fixture) events(reason, name string) (count int, messages []string) {
	f.t.Helper()
	evs, err := f.cs.CoreV1().Events(f.ns).List(f.t.Context(), metav1.ListOptions{})
	if err != nil {
		f.t.Fatalf("list events: %v", err)
	}
	for _, e := range evs.Items {
		if e.Reason == reason && e.InvolvedObject.Name == name {
			count += int(max(e.Count, 1))
			messages = append(messages, e.Message)
		}
	}
	return count, messages
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podWatcher follows the pods of an app and records the extremes of the
// total and the ready count seen at any instant.
type podWatcher struct {
	mu       sync.Mutex
	pods     map[types.UID]*corev1.Pod
	added    int // ADDED events, the initial list's included
	maxTotal int
	minReady int
	both     bool // pods of two templates existed at the same time
	stop     func()
	done     chan struct{}
}

func (f *fixture) watchPods(app string) *podWatcher {
	f.t.Helper()
	ctx := context.Background() // stopped by finish, not by the test's end
	l, err := f.cs.CoreV1().Pods(f.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		f.t.Fatalf("list pods of %s: %v", app, err)
	}
	w, err := f.cs.CoreV1().Pods(f.ns).Watch(ctx, metav1.ListOptions{LabelSelector: "app=" + app, ResourceVersion: l.ResourceVersion})
	if err != nil {
		f.t.Fatalf("watch pods of %s: %v", app, err)
	}
	pw := &podWatcher{pods: map[types.UID]*corev1.Pod{}, added: len(l.Items), minReady: 1 << 30, stop: w.Stop, done: make(chan struct{})}
	for i := range l.Items {
		pw.pods[l.Items[i].UID] = &l.Items[i]
	}
	pw.observe()
	go func() {
		defer close(pw.done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			pw.mu.Lock()
			if ev.Type == watch.Added {
				pw.added++
			}
			if ev.Type == watch.Deleted || p.DeletionTimestamp != nil {
				delete(pw.pods, p.UID)
			} else {
				pw.pods[p.UID] = p
			}
			pw.mu.Unlock()
			pw.observe()
		}
	}()
	return pw
}

func (pw *podWatcher) observe() {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	total, ready := 0, 0
	hashes := map[string]bool{}
	for _, p := range pw.pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		total++
		hashes[p.Labels[appsv1.DefaultDeploymentUniqueLabelKey]] = true
		if podReady(p) {
			ready++
		}
	}
	pw.maxTotal = max(pw.maxTotal, total)
	pw.minReady = min(pw.minReady, ready)
	pw.both = pw.both || len(hashes) > 1
}

// finish stops the watch and returns what it saw.
func (pw *podWatcher) finish() podWatch {
	pw.stop()
	<-pw.done
	pw.mu.Lock()
	defer pw.mu.Unlock()
	return podWatch{added: pw.added, maxTotal: pw.maxTotal, minReady: pw.minReady, both: pw.both}
}

// podWatch is what a podWatcher saw.
type podWatch struct {
	added, maxTotal, minReady int
	both                      bool
}

func (w podWatch) String() string {
	return fmt.Sprintf("%d added, at most %d pods, at least %d ready, two templates at once: %v", w.added, w.maxTotal, w.minReady, w.both)
}
