package nodelet

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/eviction"
	"github.com/nodelet/nodelet/runtime"
)

// The status an evicted pod ends with is Failed/Evicted whatever its
// stopped containers made of it, once; other pods are left alone.
func TestEvictionsFinalStatus(t *testing.T) {
	e := &evictions{byUID: map[types.UID]eviction.Eviction{}}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"}}
	e.add(eviction.Eviction{Pod: p, Signal: eviction.MemoryAvailable, Message: "The node was low on resource: memory. "})
	computed := corev1.PodStatus{Phase: corev1.PodSucceeded, Conditions: []corev1.PodCondition{{Type: corev1.PodReady}}}
	st, ok := e.finalStatus(p, computed)
	if !ok || st.Phase != corev1.PodFailed || st.Reason != "Evicted" || st.Message != "The node was low on resource: memory. " {
		t.Fatalf("final status %+v, %v", st, ok)
	}
	if c := st.Conditions[len(st.Conditions)-1]; c.Type != corev1.DisruptionTarget || c.Status != corev1.ConditionTrue {
		t.Errorf("conditions %+v", st.Conditions)
	}
	if _, ok := e.finalStatus(p, computed); ok {
		t.Error("the eviction was not forgotten after its termination")
	}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u2"}}
	if _, ok := e.finalStatus(other, computed); ok {
		t.Error("a pod never evicted got an eviction status")
	}
}

// The collector used under disk pressure has thresholds 0/0: whatever the
// usage it asks for all the used space back, so the plan takes every
// unused image past its minimum age (upstream's DeleteUnusedImages, which
// the images' own bytes on that filesystem bound), not down to a low
// threshold.
func TestEvictionImageGCFreesAllUnused(t *testing.T) {
	p := runtime.ImageGCPolicy{MinAge: time.Minute}
	if got := runtime.BytesToFree(p, runtime.FSUsage{Capacity: 100, Available: 90}); got != 10 {
		t.Errorf("BytesToFree at 10%% used = %d, want all 10 used bytes", got)
	}
	now := time.Now()
	imgs := []runtime.ImageRecord{
		{ID: "old", Size: 4, FirstSeen: now.Add(-time.Hour)},
		{ID: "used", Size: 4, FirstSeen: now.Add(-time.Hour), InUse: true},
		{ID: "new", Size: 4, FirstSeen: now},
		{ID: "old2", Size: 4, FirstSeen: now.Add(-time.Hour)},
	}
	got := runtime.PlanImageGC(p, runtime.FSUsage{Capacity: 1000, Available: 980}, imgs, now)
	if len(got) != 2 || got[0].ID != "old" || got[1].ID != "old2" {
		t.Errorf("plan = %+v, want old and old2", got)
	}
}
