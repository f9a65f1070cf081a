package podworkers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/test/testkit"
)

// call is one recorded Syncer call.
type call struct {
	uid   types.UID
	op    string // sync, terminating, terminated
	rv    string // the pod's resourceVersion
	grace int64
}

// fakeSyncer records calls, sends each on started, and runs hook (if set)
// to decide how the call ends; it fails the test if two calls for one pod
// overlap.
type fakeSyncer struct {
	t       *testing.T
	started chan call
	hook    func(ctx context.Context, c call) error
	// result, optional, is SyncPod's result when it succeeds.
	result func(c call) SyncResult

	mu       sync.Mutex
	calls    []call
	inflight map[types.UID]int
}

func newFake(t *testing.T, hook func(ctx context.Context, c call) error) *fakeSyncer {
	return &fakeSyncer{t: t, started: make(chan call, 1000), hook: hook, inflight: map[types.UID]int{}}
}

func (f *fakeSyncer) do(ctx context.Context, pod *corev1.Pod, op string, grace int64) error {
	c := call{uid: pod.UID, op: op, rv: pod.ResourceVersion, grace: grace}
	f.mu.Lock()
	f.inflight[c.uid]++
	if f.inflight[c.uid] > 1 {
		f.t.Errorf("two calls at once for pod %s", c.uid)
	}
	f.calls = append(f.calls, c)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inflight[c.uid]--
		f.mu.Unlock()
	}()
	f.started <- c
	if f.hook != nil {
		return f.hook(ctx, c)
	}
	return nil
}

func (f *fakeSyncer) SyncPod(ctx context.Context, pod *corev1.Pod) (SyncResult, error) {
	if err := f.do(ctx, pod, "sync", 0); err != nil || f.result == nil {
		return SyncResult{}, err
	}
	return f.result(call{uid: pod.UID, op: "sync", rv: pod.ResourceVersion}), nil
}
func (f *fakeSyncer) SyncTerminatingPod(ctx context.Context, pod *corev1.Pod, grace int64) error {
	return f.do(ctx, pod, "terminating", grace)
}
func (f *fakeSyncer) SyncTerminatedPod(ctx context.Context, pod *corev1.Pod) error {
	return f.do(ctx, pod, "terminated", 0)
}

func (f *fakeSyncer) ops(uid types.UID) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		if c.uid == uid {
			out = append(out, c.op+":"+c.rv)
		}
	}
	return out
}

func (f *fakeSyncer) next(t *testing.T) call {
	t.Helper()
	select {
	case c := <-f.started:
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("timed out waiting for a Syncer call")
	}
	return call{}
}

func (f *fakeSyncer) expectNone(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case c := <-f.started:
		t.Fatalf("unexpected call %+v", c)
	case <-time.After(d):
	}
}

func pod(uid, rv string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: "p-" + uid, Namespace: "ns", ResourceVersion: rv}}
}

func newWorkers(t *testing.T, f *fakeSyncer, cfg Config) *Workers {
	cfg.Syncer = f
	cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	if cfg.ResyncInterval == 0 {
		cfg.ResyncInterval = time.Hour
	}
	w := New(cfg)
	t.Cleanup(w.Shutdown)
	return w
}

func grace(g int64) *int64 { return &g }

func TestSerializedAndCollapsedToLatest(t *testing.T) {
	release := make(chan struct{})
	f := newFake(t, func(ctx context.Context, c call) error {
		if c.rv == "1" {
			<-release
		}
		return nil
	})
	w := newWorkers(t, f, Config{})
	w.Update(UpdateOptions{Pod: pod("a", "1")})
	if c := f.next(t); c.rv != "1" {
		t.Fatalf("first call %+v", c)
	}
	for i := 2; i <= 5; i++ {
		w.Update(UpdateOptions{Pod: pod("a", fmt.Sprint(i))})
	}
	close(release)
	if c := f.next(t); c.op != "sync" || c.rv != "5" {
		t.Fatalf("after collapse got %+v, want sync of rv 5", c)
	}
	f.expectNone(t, 100*time.Millisecond)
	if got := f.ops("a"); len(got) != 2 {
		t.Fatalf("calls %v, want 2", got)
	}
}

func TestPodsRunInParallel(t *testing.T) {
	// Each pod's call returns only once the other pod's call has started:
	// serialized across pods, this would never finish.
	var both sync.WaitGroup
	both.Add(2)
	f := newFake(t, func(ctx context.Context, c call) error {
		both.Done()
		both.Wait()
		return nil
	})
	w := newWorkers(t, f, Config{})
	w.Update(UpdateOptions{Pod: pod("a", "1")})
	w.Update(UpdateOptions{Pod: pod("b", "1")})
	f.next(t)
	f.next(t)
	testkit.Eventually(t, 5*time.Second, "no sync in flight", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.inflight["a"] == 0 && f.inflight["b"] == 0
	})
}

func TestKillCancelsSyncThenTerminatingThenTerminated(t *testing.T) {
	syncCancelled := make(chan struct{})
	f := newFake(t, func(ctx context.Context, c call) error {
		if c.op == "sync" {
			<-ctx.Done()
			close(syncCancelled)
			return fmt.Errorf("start container: %w", ctx.Err())
		}
		return nil
	})
	w := newWorkers(t, f, Config{})
	w.Update(UpdateOptions{Pod: pod("a", "1")})
	f.next(t)
	w.Update(UpdateOptions{Pod: pod("a", "2"), Kind: Kill, GracePeriod: grace(7)})
	select {
	case <-syncCancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("Kill did not cancel the SyncPod in progress")
	}
	if c := f.next(t); c.op != "terminating" || c.grace != 7 || c.rv != "2" {
		t.Fatalf("got %+v, want terminating rv 2 grace 7", c)
	}
	if c := f.next(t); c.op != "terminated" {
		t.Fatalf("got %+v, want terminated", c)
	}
	testkit.Eventually(t, 5*time.Second, "no worker", func() bool { return !w.Lifecycle().State("a").Worker })
	if l := w.Lifecycle(); !l.Terminated("a") || l.ContentRemovable("a") || !l.Known("a") || l.Active("a") {
		t.Fatalf("terminated=%v remove=%v known=%v active=%v, want true,false,true,false (still in the API)",
			l.Terminated("a"), l.ContentRemovable("a"), l.Known("a"), l.Active("a"))
	}
	// Never SyncPod again for a terminated UID.
	w.Update(UpdateOptions{Pod: pod("a", "3")})
	w.Update(UpdateOptions{Pod: pod("a", "4"), Kind: Kill})
	f.expectNone(t, 100*time.Millisecond)
	// The API object goes: the pod is forgotten for good.
	w.Update(UpdateOptions{Pod: pod("a", "5"), Kind: Remove})
	f.expectNone(t, 50*time.Millisecond)
	if l := w.Lifecycle(); l.Terminated("a") || !l.ContentRemovable("a") || l.Known("a") {
		t.Fatal("a removed pod is still remembered")
	}
	if got, want := fmt.Sprint(f.ops("a")), "[sync:1 terminating:2 terminated:2]"; got != want {
		t.Fatalf("calls %s, want %s", got, want)
	}
}

func TestDeletedOrFinishedPodIsKilled(t *testing.T) {
	f := newFake(t, nil)
	w := newWorkers(t, f, Config{})
	p := pod("a", "1")
	now := metav1.Now()
	p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &now, grace(12)
	w.Update(UpdateOptions{Pod: p})
	if c := f.next(t); c.op != "terminating" || c.grace != 12 {
		t.Fatalf("got %+v, want terminating with the deletion grace period", c)
	}
	f.next(t)

	q := pod("b", "1")
	q.Status.Phase = corev1.PodSucceeded
	w.Update(UpdateOptions{Pod: q})
	if c := f.next(t); c.op != "terminating" {
		t.Fatalf("got %+v, want terminating for a finished pod", c)
	}
}

// A pod whose SyncPod says it finished is terminated and cleaned up, and
// later updates of it do not start it again.
func TestFinishedSyncTerminatesThePod(t *testing.T) {
	f := newFake(t, nil)
	f.result = func(call) SyncResult { return SyncResult{Finished: true} }
	w := newWorkers(t, f, Config{})
	p := pod("a", "1")
	p.Spec.TerminationGracePeriodSeconds = grace(7)
	w.Update(UpdateOptions{Pod: p})
	for _, want := range []string{"sync", "terminating", "terminated"} {
		if c := f.next(t); c.op != want || (want == "terminating" && c.grace != 7) {
			t.Fatalf("got %+v, want %s", c, want)
		}
	}
	testkit.Eventually(t, 5*time.Second, "pod terminated", func() bool { return w.Lifecycle().Terminated(p.UID) })
	w.Update(UpdateOptions{Pod: pod("a", "2")})
	f.expectNone(t, 200*time.Millisecond)
}

func TestOrphanRemoveGoesStraightToTermination(t *testing.T) {
	f := newFake(t, nil)
	w := newWorkers(t, f, Config{})
	w.Update(UpdateOptions{Pod: pod("o", ""), Kind: Remove, GracePeriod: grace(0)})
	if c := f.next(t); c.op != "terminating" || c.grace != 0 {
		t.Fatalf("got %+v", c)
	}
	if c := f.next(t); c.op != "terminated" {
		t.Fatalf("got %+v", c)
	}
	testkit.Eventually(t, 5*time.Second, "the orphan forgotten", func() bool { return !w.Lifecycle().Known("o") })
	if l := w.Lifecycle(); !l.ContentRemovable("o") || l.Terminated("o") {
		t.Fatal("a removed orphan must be forgotten")
	}
}

func TestShorterGraceRestartsTermination(t *testing.T) {
	f := newFake(t, func(ctx context.Context, c call) error {
		if c.op == "terminating" && c.grace == 30 {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	w := newWorkers(t, f, Config{})
	w.Update(UpdateOptions{Pod: pod("a", "1"), Kind: Kill, GracePeriod: grace(30)})
	f.next(t)
	w.Update(UpdateOptions{Pod: pod("a", "1"), Kind: Kill, GracePeriod: grace(60)}) // longer: ignored
	f.expectNone(t, 50*time.Millisecond)
	w.Update(UpdateOptions{Pod: pod("a", "1"), Kind: Kill, GracePeriod: grace(2)})
	if c := f.next(t); c.op != "terminating" || c.grace != 2 {
		t.Fatalf("got %+v, want terminating with grace 2", c)
	}
}

func TestErrorsRetryTheSameWork(t *testing.T) {
	var mu sync.Mutex
	fails := map[string]int{"sync": 2, "terminating": 1, "terminated": 1}
	f := newFake(t, func(ctx context.Context, c call) error {
		mu.Lock()
		defer mu.Unlock()
		if fails[c.op] > 0 {
			fails[c.op]--
			return errors.New("boom")
		}
		return nil
	})
	w := newWorkers(t, f, Config{BackoffBase: 5 * time.Millisecond})
	w.Update(UpdateOptions{Pod: pod("a", "1")})
	for range 3 {
		if c := f.next(t); c.op != "sync" {
			t.Fatalf("got %+v, want sync retries", c)
		}
	}
	w.Update(UpdateOptions{Pod: pod("a", "2"), Kind: Kill, GracePeriod: grace(3)})
	for _, want := range []string{"terminating", "terminating", "terminated", "terminated"} {
		if c := f.next(t); c.op != want || (want == "terminating" && c.grace != 3) {
			t.Fatalf("got %+v, want %s", c, want)
		}
	}
	f.expectNone(t, 50*time.Millisecond)
}

func TestResyncAndBackoffUseTheClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	failed := false
	f := newFake(t, func(ctx context.Context, c call) error {
		if c.rv == "2" && !failed {
			failed = true
			return errors.New("boom")
		}
		return nil
	})
	w := newWorkers(t, f, Config{Clock: clk, ResyncInterval: 10 * time.Second, BackoffBase: time.Second})
	w.Update(UpdateOptions{Pod: pod("a", "1")})
	f.next(t)
	testkit.Eventually(t, 5*time.Second, "the worker waiting on the clock", clk.HasWaiters)
	clk.Step(9 * time.Second)
	f.expectNone(t, 50*time.Millisecond)
	clk.Step(time.Second)
	if c := f.next(t); c.rv != "1" {
		t.Fatalf("resync got %+v", c)
	}
	testkit.Eventually(t, 5*time.Second, "the worker waiting on the clock", clk.HasWaiters)
	w.Update(UpdateOptions{Pod: pod("a", "2")}) // fails once
	f.next(t)
	testkit.Eventually(t, 5*time.Second, "the worker waiting for the backoff", clk.HasWaiters)
	clk.Step(time.Second) // the backoff, far shorter than the resync
	if c := f.next(t); c.rv != "2" {
		t.Fatalf("retry got %+v", c)
	}
}

func TestResyncAfterShortensTheNextWait(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	asked := false
	f := newFake(t, nil)
	f.result = func(call) SyncResult {
		if asked {
			return SyncResult{}
		}
		asked = true
		return SyncResult{ResyncAfter: 3 * time.Second}
	}
	w := newWorkers(t, f, Config{Clock: clk, ResyncInterval: 10 * time.Second})
	w.Update(UpdateOptions{Pod: pod("a", "1")})
	f.next(t)
	testkit.Eventually(t, 5*time.Second, "the worker waiting on the clock", clk.HasWaiters)
	clk.Step(2 * time.Second)
	f.expectNone(t, 50*time.Millisecond)
	clk.Step(time.Second)
	f.next(t)
	// Used once: the wait after that sync is the resync interval again.
	testkit.Eventually(t, 5*time.Second, "the worker waiting on the clock", clk.HasWaiters)
	clk.Step(3 * time.Second)
	f.expectNone(t, 50*time.Millisecond)
	clk.Step(7 * time.Second)
	f.next(t)
}

func TestShutdownLeavesPodsAlone(t *testing.T) {
	f := newFake(t, func(ctx context.Context, c call) error {
		if c.op == "sync" && c.uid == "a" {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	w := newWorkers(t, f, Config{})
	w.Update(UpdateOptions{Pod: pod("a", "1")})
	w.Update(UpdateOptions{Pod: pod("b", "1")})
	f.next(t)
	f.next(t)
	done := make(chan struct{})
	go func() { w.Shutdown(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown did not return")
	}
	w.Update(UpdateOptions{Pod: pod("c", "1"), Kind: Kill})
	f.expectNone(t, 50*time.Millisecond)
	for _, uid := range []types.UID{"a", "b"} {
		for _, op := range f.ops(uid) {
			if op != "sync:1" {
				t.Fatalf("pod %s got %s on shutdown", uid, op)
			}
		}
		if w.Lifecycle().State(uid).TerminationRequested {
			t.Fatalf("pod %s marked for termination by Shutdown", uid)
		}
	}
}

// The Board shows each step of a pod's life to readers that were given it
// before the workers existed.
func TestLifecycleIsPublishedOnTheBoard(t *testing.T) {
	release := make(chan struct{})
	f := newFake(t, func(ctx context.Context, c call) error {
		if c.op == "terminating" {
			<-release
		}
		return nil
	})
	board := NewBoard()
	w := newWorkers(t, f, Config{Board: board})
	if board.Lifecycle().Known("a") {
		t.Fatal("an unknown pod is known")
	}
	w.Update(UpdateOptions{Pod: pod("a", "1")})
	if l := board.Lifecycle(); !l.Active("a") || l.Terminated("a") || l.ContentRemovable("a") {
		t.Fatalf("new pod: %+v, want active, not terminated, content kept", l.State("a"))
	}
	f.next(t)
	w.Update(UpdateOptions{Pod: pod("a", "2"), Kind: Remove})
	if s := board.Lifecycle().State("a"); !s.TerminationRequested || s.Terminated || !s.Removed || board.Lifecycle().Active("a") {
		t.Fatalf("killed pod: %+v, want termination requested and removed, not terminated", s)
	}
	old := board.Lifecycle()
	close(release)
	testkit.Eventually(t, 5*time.Second, "the pod forgotten", func() bool { return !board.Lifecycle().Known("a") })
	if !old.Known("a") || old.Terminated("a") {
		t.Fatal("a snapshot changed after it was taken")
	}
	if !board.Lifecycle().ContentRemovable("a") {
		t.Fatal("a pod cleaned up and gone from the API keeps its content")
	}
}
