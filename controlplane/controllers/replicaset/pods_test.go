package replicaset

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

type podOpt func(*corev1.Pod)

func node(n string) podOpt { return func(p *corev1.Pod) { p.Spec.NodeName = n } }
func phase(ph corev1.PodPhase) podOpt {
	return func(p *corev1.Pod) { p.Status.Phase = ph }
}
func readySince(t time.Time) podOpt {
	return func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t)}}
	}
}
func created(t time.Time) podOpt {
	return func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(t) }
}
func restarts(n int32) podOpt {
	return func(p *corev1.Pod) { p.Status.ContainerStatuses = []corev1.ContainerStatus{{RestartCount: n}} }
}
func cost(v string) podOpt {
	return func(p *corev1.Pod) { p.Annotations = map[string]string{podDeletionCostAnnotation: v} }
}
func terminating() podOpt {
	return func(p *corev1.Pod) { now := metav1.NewTime(t0); p.DeletionTimestamp = &now }
}

func mkPod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{"app": "x"}}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func names(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func TestPodsToDeletePreference(t *testing.T) {
	running := phase(corev1.PodRunning)
	tests := []struct {
		name    string
		pods    []*corev1.Pod
		related []*corev1.Pod
		want    string // the first victim
	}{
		{"unscheduled before scheduled", []*corev1.Pod{mkPod("a", node("n1"), running), mkPod("b")}, nil, "b"},
		{"pending before running", []*corev1.Pod{mkPod("a", node("n1"), running), mkPod("b", node("n1"), phase(corev1.PodPending))}, nil, "b"},
		{"unknown before running", []*corev1.Pod{mkPod("a", node("n1"), running), mkPod("b", node("n1"), phase(corev1.PodUnknown))}, nil, "b"},
		{"pending before unknown", []*corev1.Pod{mkPod("a", node("n1"), phase(corev1.PodUnknown)), mkPod("b", node("n1"), phase(corev1.PodPending))}, nil, "b"},
		{"not ready before ready", []*corev1.Pod{mkPod("a", node("n1"), running, readySince(t0)), mkPod("b", node("n1"), running)}, nil, "b"},
		{"lower deletion cost first", []*corev1.Pod{mkPod("a", node("n1"), running, cost("10")), mkPod("b", node("n1"), running, cost("-5"))}, nil, "b"},
		{"crowded node first",
			[]*corev1.Pod{mkPod("a", node("n1"), running), mkPod("b", node("n2"), running)},
			[]*corev1.Pod{mkPod("a", node("n1")), mkPod("b", node("n2")), mkPod("c", node("n2"))}, "b"},
		{"ready for less time first", []*corev1.Pod{mkPod("a", node("n1"), running, readySince(t0)), mkPod("b", node("n1"), running, readySince(t0.Add(time.Minute)))}, nil, "b"},
		{"more restarts first", []*corev1.Pod{mkPod("a", node("n1"), running, restarts(1)), mkPod("b", node("n1"), running, restarts(4))}, nil, "b"},
		{"younger first", []*corev1.Pod{mkPod("a", node("n1"), running, created(t0)), mkPod("b", node("n1"), running, created(t0.Add(time.Second)))}, nil, "b"},
		{"no creation time is youngest", []*corev1.Pod{mkPod("a", node("n1"), running, created(t0)), mkPod("b", node("n1"), running)}, nil, "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := podsToDelete(tt.pods, tt.related, 1)
			if len(got) != 1 || got[0].Name != tt.want {
				t.Fatalf("victims %v, want [%s]", names(got), tt.want)
			}
		})
	}
}

func TestPodsToDeleteAll(t *testing.T) {
	pods := []*corev1.Pod{mkPod("a"), mkPod("b")}
	if got := podsToDelete(pods, nil, 5); len(got) != 2 {
		t.Fatalf("got %v", names(got))
	}
}

func TestSlowStartBatch(t *testing.T) {
	tests := []struct {
		name     string
		count    int
		failFrom int64 // calls numbered from 1; calls >= failFrom fail (0: none)
		wantOK   int
		wantCall int64
	}{
		{"all succeed", 10, 0, 10, 10},
		{"zero", 0, 0, 0, 0},
		{"first call fails", 10, 1, 0, 1},
		// Batches 1, 2, 4: call 4 fails inside the third batch of 4, so
		// 1+2 succeed before it and 3 more in it; nothing after.
		{"fails in third batch", 10, 4, 3 + 3, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int64
			ok, err := slowStartBatch(tt.count, 1, func() error {
				n := calls.Add(1)
				if tt.failFrom > 0 && n == tt.failFrom {
					return errors.New("boom")
				}
				return nil
			})
			if ok != tt.wantOK || calls.Load() != tt.wantCall || (err != nil) != (tt.failFrom > 0) {
				t.Fatalf("ok %d calls %d err %v; want ok %d calls %d", ok, calls.Load(), err, tt.wantOK, tt.wantCall)
			}
		})
	}
}

func TestIsPodActiveAndAvailable(t *testing.T) {
	tests := []struct {
		name      string
		pod       *corev1.Pod
		minReady  int32
		active    bool
		available bool
	}{
		{"pending", mkPod("a", phase(corev1.PodPending)), 0, true, false},
		{"succeeded", mkPod("a", phase(corev1.PodSucceeded)), 0, false, false},
		{"failed", mkPod("a", phase(corev1.PodFailed)), 0, false, false},
		{"terminating", mkPod("a", phase(corev1.PodRunning), terminating()), 0, false, false},
		{"ready", mkPod("a", phase(corev1.PodRunning), readySince(t0)), 0, true, true},
		{"ready long enough", mkPod("a", phase(corev1.PodRunning), readySince(t0.Add(-11*time.Second))), 10, true, true},
		{"ready too recently", mkPod("a", phase(corev1.PodRunning), readySince(t0.Add(-5*time.Second))), 10, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsPodActive(tt.pod); got != tt.active {
				t.Errorf("active %v", got)
			}
			if got := IsPodAvailable(tt.pod, tt.minReady, t0); got != tt.available {
				t.Errorf("available %v", got)
			}
		})
	}
}

func TestCalculateStatus(t *testing.T) {
	rs := &appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Replicas: ptr(int32(3)), MinReadySeconds: 10,
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x", "tier": "web"}}}}}
	full := func(p *corev1.Pod) { p.Labels["tier"] = "web" }
	pods := []*corev1.Pod{
		mkPod("a", full, readySince(t0.Add(-time.Minute))),
		mkPod("b", full, readySince(t0)),
		mkPod("c"),
	}
	st := calculateStatus(rs, pods, nil, t0)
	if st.Replicas != 3 || st.FullyLabeledReplicas != 2 || st.ReadyReplicas != 2 || st.AvailableReplicas != 1 || len(st.Conditions) != 0 {
		t.Fatalf("status %+v", st)
	}
	st = calculateStatus(rs, pods[:1], errors.New("quota"), t0)
	if c := replicaSetCondition(st, appsv1.ReplicaSetReplicaFailure); c == nil || c.Reason != "FailedCreate" || c.Message != "quota" {
		t.Fatalf("conditions %+v", st.Conditions)
	}
	rs.Status = st
	if st = calculateStatus(rs, pods, nil, t0); len(st.Conditions) != 0 {
		t.Fatalf("failure condition not cleared: %+v", st.Conditions)
	}
}

func TestExpectations(t *testing.T) {
	now := t0
	e := newExpectations(func() time.Time { return now })
	if !e.Satisfied("k") {
		t.Fatal("unknown key must be satisfied")
	}
	e.ExpectCreations("k", 2)
	e.CreationObserved("k")
	if e.Satisfied("k") {
		t.Fatal("one creation outstanding")
	}
	e.CreationObserved("k")
	if !e.Satisfied("k") {
		t.Fatal("all creations observed")
	}
	e.ExpectDeletions("k", []string{"ns/a", "ns/b"})
	e.DeletionObserved("k", "ns/a")
	e.DeletionObserved("k", "ns/a") // the same pod again: not counted twice
	e.DeletionObserved("k", "ns/zzz")
	if e.Satisfied("k") {
		t.Fatal("ns/b not yet observed")
	}
	now = now.Add(ExpectationsTimeout + time.Second)
	if !e.Satisfied("k") {
		t.Fatal("expired expectations must be satisfied")
	}
	e.Delete("k")
	if !e.Satisfied("k") {
		t.Fatal("deleted key")
	}
}

func TestPodFromTemplate(t *testing.T) {
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-abc", Namespace: "ns", UID: "u1"},
		Spec: appsv1.ReplicaSetSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}, Annotations: map[string]string{"a": "b"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}}}}}
	p := podFromTemplate(rs, metav1.NewControllerRef(rs, controllerKind))
	ref := metav1.GetControllerOf(p)
	if p.GenerateName != "web-abc-" || p.Labels["app"] != "x" || p.Annotations["a"] != "b" || p.Spec.Containers[0].Image != "img" ||
		ref == nil || ref.UID != "u1" || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Fatalf("pod %+v", p)
	}
	p.Labels["app"] = "changed"
	if rs.Spec.Template.Labels["app"] != "x" {
		t.Fatal("pod shares the template's labels map")
	}
}

func ptr[T any](v T) *T { return &v }
