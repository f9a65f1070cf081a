package podlifecycle

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/admission"
	"github.com/nodelet/nodelet/eviction"
	"github.com/nodelet/nodelet/podworkers"
)

func TestEvictionsFinalStatus(t *testing.T) {
	e := NewEvictions()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"}}
	e.add(eviction.Eviction{Pod: p, Signal: eviction.MemoryAvailable, Message: "The node was low on resource: memory. "})
	computed := corev1.PodStatus{Phase: corev1.PodSucceeded, Conditions: []corev1.PodCondition{{Type: corev1.PodReady}}}
	st, ok := e.FinalStatus(p, computed)
	if !ok || st.Phase != corev1.PodFailed || st.Reason != "Evicted" || st.Message != "The node was low on resource: memory. " {
		t.Fatalf("final status %+v, %v", st, ok)
	}
	if c := st.Conditions[len(st.Conditions)-1]; c.Type != corev1.DisruptionTarget || c.Status != corev1.ConditionTrue {
		t.Errorf("conditions %+v", st.Conditions)
	}
	if _, ok := e.FinalStatus(p, computed); ok {
		t.Error("the eviction was not forgotten after its termination")
	}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u2"}}
	if _, ok := e.FinalStatus(other, computed); ok {
		t.Error("a pod never evicted got an eviction status")
	}
}

type fakeWorkers struct{ updates []podworkers.UpdateOptions }

func (f *fakeWorkers) Update(o podworkers.UpdateOptions) { f.updates = append(f.updates, o) }

type fakeStatuses struct {
	set        map[types.UID]corev1.PodStatus
	terminated []types.UID
}

func (f *fakeStatuses) GetPodStatus(uid types.UID) (corev1.PodStatus, bool) {
	st, ok := f.set[uid]
	return st, ok
}
func (f *fakeStatuses) SetPodStatus(p *corev1.Pod, st corev1.PodStatus) { f.set[p.UID] = st }
func (f *fakeStatuses) TerminatePod(p *corev1.Pod)                      { f.terminated = append(f.terminated, p.UID) }

// Evict writes Failed/Evicted at once, kills with the eviction's grace
// period and leaves the final status to the termination.
func TestEvictorKillsWithTheEvictionsGrace(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"}}
	w, st := &fakeWorkers{}, &fakeStatuses{set: map[types.UID]corev1.PodStatus{}}
	v := &Evictor{Evictions: NewEvictions(), Status: st, Workers: w}
	v.Evict(eviction.Eviction{Pod: p, Signal: eviction.MemoryAvailable, Message: "low", GracePeriod: 3})
	if s := st.set["u1"]; s.Reason != "Evicted" || s.Message != "low" {
		t.Errorf("status at eviction %+v", s)
	}
	if len(w.updates) != 1 || w.updates[0].Kind != podworkers.Kill || *w.updates[0].GracePeriod != 3 {
		t.Fatalf("updates %+v, want one kill with grace 3", w.updates)
	}
	if _, ok := v.Evictions.FinalStatus(p, corev1.PodStatus{}); !ok {
		t.Error("the eviction was not recorded for the final status")
	}
}

// The admitter decides once per new pod, against the active pods only,
// and a refusal is final: Failed and terminal.
func TestAdmitter(t *testing.T) {
	pod := func(uid string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "ns", UID: types.UID(uid)}}
	}
	board := podworkers.NewBoard()
	workers := podworkers.New(podworkers.Config{Syncer: nopSyncer{}, Board: board})
	t.Cleanup(workers.Shutdown)
	running, deleting := pod("running"), pod("deleting")
	workers.Update(podworkers.UpdateOptions{Pod: running})
	workers.Update(podworkers.UpdateOptions{Pod: deleting, Kind: podworkers.Kill})
	var seen [][]types.UID
	st := &fakeStatuses{set: map[types.UID]corev1.PodStatus{}}
	a := NewAdmitter(AdmitterConfig{
		Handler: admission.HandlerFunc(func(at admission.Attributes) admission.Result {
			var uids []types.UID
			for _, o := range at.Admitted {
				uids = append(uids, o.UID)
			}
			seen = append(seen, uids)
			return admission.Result{Admit: at.Pod.Name != "big", Reason: "OutOfmemory", Message: "no room"}
		}),
		Lifecycle: board.Lifecycle,
		Pods:      func() []*corev1.Pod { return []*corev1.Pod{running, deleting} },
		Status:    st,
	})
	if !a.Admitted(pod("small")) || !a.Admitted(running) {
		t.Fatal("a fitting pod or a known one was refused")
	}
	big := pod("big")
	if a.Admitted(big) || a.Admitted(big) {
		t.Fatal("a pod that does not fit was admitted")
	}
	if len(seen) != 2 || len(seen[0]) != 1 || seen[0][0] != "running" {
		t.Errorf("handler saw %v, want one decision per new pod, against the running pod only", seen)
	}
	if s := st.set["big"]; s.Phase != corev1.PodFailed || s.Reason != "OutOfmemory" || len(st.terminated) != 1 {
		t.Errorf("rejected status %+v, terminated %v", s, st.terminated)
	}
	a.Forget("big")
	if a.Admitted(big) {
		t.Error("still does not fit after Forget, yet admitted")
	}
}

type nopSyncer struct{}

func (nopSyncer) SyncPod(ctx context.Context, _ *corev1.Pod) (podworkers.SyncResult, error) {
	<-ctx.Done() // stays syncing, so active, until killed
	return podworkers.SyncResult{}, ctx.Err()
}
func (nopSyncer) SyncTerminatingPod(ctx context.Context, _ *corev1.Pod, _ int64) error {
	<-ctx.Done() // stays terminating
	return ctx.Err()
}
func (nopSyncer) SyncTerminatedPod(context.Context, *corev1.Pod) error { return nil }
