package status

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/nodelet/nodelet/controlplane/controlplanetest"
	"github.com/nodelet/nodelet/test/testkit"
)

// warnings is a slog handler that records warnings and errors.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool { msg += " " + a.String(); return true })
	w.msgs = append(w.msgs, msg)
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }
func (w *warnings) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.msgs...)
}

type env struct {
	cs   kubernetes.Interface
	m    *Manager
	warn *warnings
	run  func() // starts the manager's writer
}

func newEnv(t *testing.T, cfg ManagerConfig) *env {
	srv := controlplanetest.Start(t, controlplanetest.Options{})
	cs := srv.Clientset(t)
	w := &warnings{}
	cfg.Client, cfg.Log = cs, slog.New(w)
	m := NewManager(cfg)
	e := &env{cs: cs, m: m, warn: w}
	e.run = func() {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = m.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	return e
}

func (e *env) createPod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	out, err := e.cs.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// writes counts the MODIFIED events of one pod from a resourceVersion on
// and remembers the latest object and whether it was deleted.
type writes struct {
	n       atomic.Int32
	mu      sync.Mutex
	last    *corev1.Pod
	deleted bool
}

func (e *env) watch(t *testing.T, pod *corev1.Pod) *writes {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := e.cs.CoreV1().Pods(pod.Namespace).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", pod.Name).String(), ResourceVersion: pod.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	out := &writes{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			out.mu.Lock()
			switch ev.Type {
			case watch.Modified:
				out.n.Add(1)
				out.last = p
			case watch.Deleted:
				out.deleted = true
			}
			out.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); w.Stop(); <-done })
	return out
}

func (w *writes) get() (int, *corev1.Pod, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return int(w.n.Load()), w.last, w.deleted
}

// waitWrites waits for n writes, then checks that no more come.
func (w *writes) waitWrites(t *testing.T, n int) *corev1.Pod {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("%d status writes", n), func() bool { got, _, _ := w.get(); return got >= n })
	time.Sleep(300 * time.Millisecond)
	got, last, _ := w.get()
	if got != n {
		t.Fatalf("%d status writes, want %d", got, n)
	}
	return last
}

func mcond(t corev1.PodConditionType, s corev1.ConditionStatus) corev1.PodCondition {
	return corev1.PodCondition{Type: t, Status: s, LastTransitionTime: metav1.NewTime(time.Now().Truncate(time.Second))}
}

// runningStatus is a Running status with container c ready or not.
func runningStatus(ready bool) corev1.PodStatus {
	r := corev1.ConditionFalse
	if ready {
		r = corev1.ConditionTrue
	}
	start := metav1.NewTime(time.Now().Truncate(time.Second))
	return corev1.PodStatus{
		Phase: corev1.PodRunning, StartTime: &start, PodIP: "10.0.0.5", PodIPs: []corev1.PodIP{{IP: "10.0.0.5"}},
		Conditions: []corev1.PodCondition{mcond(corev1.PodScheduled, corev1.ConditionTrue), mcond(corev1.PodInitialized, corev1.ConditionTrue),
			mcond(corev1.PodReady, r), mcond(corev1.ContainersReady, r)},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Image: "busybox", Ready: ready, ContainerID: "containerd://abc",
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: start}}}},
	}
}

func findCond(s corev1.PodStatus, t corev1.PodConditionType) *corev1.PodCondition {
	return findCondition(s.Conditions, t)
}

func TestManagerWritesOncePerChangeAndKeepsForeignConditions(t *testing.T) {
	e := newEnv(t, ManagerConfig{ResyncInterval: 200 * time.Millisecond})
	ctx := context.Background()
	pod := e.createPod(t, "once")
	// A controller owns a condition of its own (a readiness gate).
	pod.Status.Conditions = append(pod.Status.Conditions, mcond("example.com/gate", corev1.ConditionTrue))
	pod, err := e.cs.CoreV1().Pods("default").UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := e.watch(t, pod)
	e.run()

	for range 3 {
		e.m.SetPodStatus(pod, runningStatus(false))
	}
	got := w.waitWrites(t, 1) // the resyncs meanwhile found nothing to write
	if got.Status.Phase != corev1.PodRunning || got.Status.PodIP != "10.0.0.5" {
		t.Fatalf("written status %+v", got.Status)
	}
	if c := findCond(got.Status, "example.com/gate"); c == nil || c.Status != corev1.ConditionTrue {
		t.Fatal("a condition owned by another component was dropped")
	}

	e.m.SetPodStatus(pod, runningStatus(true))
	e.m.SetPodStatus(pod, runningStatus(true))
	got = w.waitWrites(t, 2)
	if c := findCond(got.Status, corev1.PodReady); c == nil || c.Status != corev1.ConditionTrue {
		t.Fatalf("Ready not written: %+v", got.Status.Conditions)
	}

	// Someone else overwrites the status: the periodic resync restores it.
	got.Status.Phase = corev1.PodPending
	if _, err := e.cs.CoreV1().Pods("default").UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got = w.waitWrites(t, 4)
	if got.Status.Phase != corev1.PodRunning {
		t.Fatalf("resync did not restore the phase: %s", got.Status.Phase)
	}
	if msgs := e.warn.list(); len(msgs) > 0 {
		t.Fatalf("warnings: %v", msgs)
	}
}

func TestManagerCoalescesUpdates(t *testing.T) {
	e := newEnv(t, ManagerConfig{ResyncInterval: time.Hour})
	pod := e.createPod(t, "coalesce")
	w := e.watch(t, pod)
	step := func(i int) corev1.PodStatus {
		s := runningStatus(false)
		s.Message = fmt.Sprintf("step %d", i)
		return s
	}
	for i := range 50 {
		e.m.SetPodStatus(pod, step(i))
	}
	e.run()
	if got := w.waitWrites(t, 1); got.Status.Message != "step 49" {
		t.Fatalf("written %q, want the latest", got.Status.Message)
	}

	// While the writer runs, a burst still collapses to few writes.
	for i := 50; i < 150; i++ {
		e.m.SetPodStatus(pod, step(i))
	}
	testkit.Eventually(t, 10*time.Second, "the last status written", func() bool { _, last, _ := w.get(); return last.Status.Message == "step 149" })
	time.Sleep(200 * time.Millisecond)
	n, last, _ := w.get()
	if last.Status.Message != "step 149" || n > 40 {
		t.Fatalf("%d writes for 100 updates (last %q), want few ending with step 149", n-1, last.Status.Message)
	}
	t.Logf("100 updates during a burst -> %d writes", n-1)
}

func TestManagerTerminateThenConfirmDelete(t *testing.T) {
	e := newEnv(t, ManagerConfig{ResyncInterval: time.Hour})
	ctx := context.Background()
	pod := e.createPod(t, "bye")
	w := e.watch(t, pod)
	e.run()
	e.m.SetPodStatus(pod, runningStatus(true))
	w.waitWrites(t, 1)

	// The user deletes the pod: it gets a deletionTimestamp and stays.
	if err := e.cs.CoreV1().Pods("default").Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.waitWrites(t, 2)
	pod, err := e.cs.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil || pod.DeletionTimestamp == nil {
		t.Fatalf("pod not being deleted: %v", err)
	}
	if e.m.CanDelete(pod) {
		t.Fatal("CanDelete before the containers stopped")
	}
	// The pod worker stopped the containers.
	e.m.TerminatePod(pod)
	testkit.Eventually(t, 10*time.Second, "the pod deleted", func() bool { _, _, deleted := w.get(); return deleted })
	_, last, _ := w.get()
	cs := last.Status.ContainerStatuses[0]
	if last.Status.Phase != corev1.PodFailed || cs.State.Terminated == nil || cs.State.Terminated.Reason != ReasonContainerStatusUnknown || cs.State.Terminated.ExitCode != 137 {
		t.Fatalf("terminal status not written before deletion: %s %+v", last.Status.Phase, cs.State)
	}
	if _, err := e.cs.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("pod still there: %v", err)
	}
	testkit.Eventually(t, 10*time.Second, "no pods left", func() bool { return e.m.Len() == 0 })
	if msgs := e.warn.list(); len(msgs) > 0 {
		t.Fatalf("warnings: %v", msgs)
	}
}

func TestManagerHoldsTerminalPhaseWhileContainersMayRun(t *testing.T) {
	var running atomic.Bool
	running.Store(true)
	e := newEnv(t, ManagerConfig{ResyncInterval: 100 * time.Millisecond,
		PodCouldHaveRunningContainers: func(types.UID) bool { return running.Load() }})
	pod := e.createPod(t, "hold")
	w := e.watch(t, pod)
	e.run()
	e.m.SetPodStatus(pod, runningStatus(true))
	w.waitWrites(t, 1)
	done := runningStatus(false)
	done.Phase = corev1.PodSucceeded
	done.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}
	e.m.SetPodStatus(pod, done)
	got := w.waitWrites(t, 2)
	if got.Status.Phase != corev1.PodRunning || got.Status.ContainerStatuses[0].State.Terminated == nil {
		t.Fatalf("want container states written and the phase held: %s", got.Status.Phase)
	}
	running.Store(false)
	testkit.Eventually(t, 10*time.Second, "phase Succeeded written", func() bool { _, last, _ := w.get(); return last.Status.Phase == corev1.PodSucceeded })
}

func TestManagerForgetsPodsDeletedMeanwhile(t *testing.T) {
	e := newEnv(t, ManagerConfig{ResyncInterval: time.Hour})
	ctx := context.Background()
	gone := e.createPod(t, "gone")
	replaced := e.createPod(t, "replaced")
	zero := int64(0)
	for _, p := range []*corev1.Pod{gone, replaced} {
		e.m.SetPodStatus(p, runningStatus(true))
		if err := e.cs.CoreV1().Pods("default").Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
	}
	// A new pod of the same name (another UID) must not get the old status.
	fresh := e.createPod(t, "replaced")
	w := e.watch(t, fresh)
	e.run()
	testkit.Eventually(t, 10*time.Second, "no pods left", func() bool { return e.m.Len() == 0 })
	w.waitWrites(t, 0)
	if msgs := e.warn.list(); len(msgs) > 0 {
		t.Fatalf("warnings: %v", msgs)
	}
}

// A stale informer copy makes the first write conflict; the manager falls
// back to a GET and still writes once, and a cached copy that already
// matches costs no write at all.
func TestManagerCachedPodStaleFallsBackToGet(t *testing.T) {
	var cached atomic.Pointer[corev1.Pod]
	e := newEnv(t, ManagerConfig{ResyncInterval: 200 * time.Millisecond,
		CachedPod: func(ns, name string) *corev1.Pod { return cached.Load() }})
	ctx := context.Background()
	pod := e.createPod(t, "cached")
	cached.Store(pod.DeepCopy())
	// Someone else writes first, so the cached resourceVersion is stale.
	pod.Labels = map[string]string{"touched": "yes"}
	pod, err := e.cs.CoreV1().Pods("default").Update(ctx, pod, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := e.watch(t, pod)
	e.run()
	e.m.SetPodStatus(pod, runningStatus(true))
	got := w.waitWrites(t, 1)
	if got.Status.Phase != corev1.PodRunning || got.Labels["touched"] != "yes" {
		t.Fatalf("written pod: labels %v status %+v", got.Labels, got.Status)
	}
	cached.Store(got.DeepCopy())
	time.Sleep(600 * time.Millisecond) // resyncs compare against the cache
	w.waitWrites(t, 1)
	if msgs := e.warn.list(); len(msgs) > 0 {
		t.Fatalf("warnings: %v", msgs)
	}
}
