package queue

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/controlplane/scheduler/framework"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newQueue() (*Queue, *clock) {
	c := &clock{t: time.Unix(1000, 0)}
	return New(Options{Now: c.now}), c
}

func podInfo(name string, prio int32, created int64) *framework.PodInfo {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name),
		CreationTimestamp: metav1.Unix(created, 0)}}
	p.Spec.Priority = &prio
	return framework.NewPodInfo(p)
}

func pop(t *testing.T, q *Queue) *QueuedPod {
	t.Helper()
	if a, _, _ := q.Lens(); a == 0 {
		t.Fatal("pop: active queue empty")
	}
	qp, ok := q.Pop()
	if !ok {
		t.Fatal("pop: closed")
	}
	return qp
}

func TestActiveOrder(t *testing.T) {
	q, _ := newQueue()
	q.Add(podInfo("late", 0, 20))
	q.Add(podInfo("early", 0, 10))
	q.Add(podInfo("high", 100, 30))
	q.Add(podInfo("early-second", 0, 10))
	for _, want := range []string{"high", "early", "early-second", "late"} {
		if got := pop(t, q).Info.Pod.Name; got != want {
			t.Fatalf("popped %s, want %s", got, want)
		}
	}
}

func TestBackoffDoubles(t *testing.T) {
	q, _ := newQueue()
	for attempts, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 8 * time.Second, 5: 10 * time.Second, 9: 10 * time.Second} {
		if got := q.backoffFor(attempts); got != want {
			t.Errorf("attempts %d: backoff %v, want %v", attempts, got, want)
		}
	}
}

func TestFailedPodBacksOff(t *testing.T) {
	q, c := newQueue()
	q.Add(podInfo("p", 0, 1))
	qp := pop(t, q)
	q.Requeue(qp, false)
	if a, b, u := q.Lens(); a != 0 || b != 1 || u != 0 {
		t.Fatalf("after error: lens %d/%d/%d, want backoff", a, b, u)
	}
	c.t = c.t.Add(999 * time.Millisecond)
	q.FlushBackoff()
	if a, _, _ := q.Lens(); a != 0 {
		t.Fatal("left backoff early")
	}
	c.t = c.t.Add(time.Millisecond)
	q.FlushBackoff()
	if got := pop(t, q); got.Attempts != 2 {
		t.Errorf("attempts %d, want 2", got.Attempts)
	}
}

func TestUnschedulableMovedOnClusterChange(t *testing.T) {
	q, c := newQueue()
	q.Add(podInfo("p", 0, 1))
	q.Requeue(pop(t, q), true)
	if _, _, u := q.Lens(); u != 1 {
		t.Fatal("not parked as unschedulable")
	}
	// A change before the backoff expired sends it to backoff, after to active.
	q.MoveAllToActiveOrBackoff()
	if _, b, _ := q.Lens(); b != 1 {
		t.Fatal("not moved to backoff")
	}
	c.t = c.t.Add(time.Second)
	q.FlushBackoff()
	q.Requeue(pop(t, q), true)
	c.t = c.t.Add(5 * time.Second)
	q.MoveAllToActiveOrBackoff()
	if a, _, _ := q.Lens(); a != 1 {
		t.Fatal("not moved to active after backoff expired")
	}
}

func TestMoveDuringCycleSkipsUnschedulable(t *testing.T) {
	q, _ := newQueue()
	q.Add(podInfo("p", 0, 1))
	qp := pop(t, q)
	q.MoveAllToActiveOrBackoff() // a node was added while p was being scheduled
	q.Requeue(qp, true)
	if _, b, u := q.Lens(); b != 1 || u != 0 {
		t.Fatalf("lens backoff %d unschedulable %d: the change must not be lost", b, u)
	}
}

func TestUnschedulableTimeout(t *testing.T) {
	q, c := newQueue()
	q.Add(podInfo("p", 0, 1))
	q.Requeue(pop(t, q), true)
	c.t = c.t.Add(59 * time.Second)
	q.FlushUnschedulable()
	if _, _, u := q.Lens(); u != 1 {
		t.Fatal("flushed before 60s")
	}
	c.t = c.t.Add(time.Second)
	q.FlushUnschedulable()
	if a, _, u := q.Lens(); a != 1 || u != 0 {
		t.Fatal("not flushed after 60s")
	}
}

func TestUpdateAndDelete(t *testing.T) {
	q, _ := newQueue()
	q.Add(podInfo("p", 0, 1))
	q.Requeue(pop(t, q), true)
	q.Update(podInfo("p", 0, 1)) // spec change: retry
	if _, b, u := q.Lens(); b != 1 || u != 0 {
		t.Fatalf("update of unschedulable pod: backoff %d unschedulable %d", b, u)
	}
	q.Delete("ns/p")
	if a, b, u := q.Lens(); a+b+u != 0 {
		t.Fatal("delete left the pod queued")
	}
	// Deleted while in flight: a failure does not requeue it.
	q.Add(podInfo("r", 0, 1))
	qp := pop(t, q)
	q.Delete("ns/r")
	q.Requeue(qp, false)
	if a, b, u := q.Lens(); a+b+u != 0 {
		t.Fatal("deleted in-flight pod requeued")
	}
	// Updated while in flight: the newer version is requeued.
	q.Add(podInfo("s", 0, 1))
	qp = pop(t, q)
	newer := podInfo("s", 7, 1)
	q.Update(newer)
	q.Requeue(qp, true)
	if _, b, _ := q.Lens(); b != 1 || q.pods["ns/s"].Info != newer {
		t.Fatal("newer version not requeued to backoff")
	}
}

func TestCloseUnblocksPop(t *testing.T) {
	q, _ := newQueue()
	done := make(chan bool)
	go func() {
		_, ok := q.Pop()
		done <- ok
	}()
	time.Sleep(10 * time.Millisecond)
	q.Close()
	if <-done {
		t.Fatal("Pop returned a pod after Close")
	}
}
