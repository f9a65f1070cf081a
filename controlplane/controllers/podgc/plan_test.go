package podgc

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type podOpt func(*corev1.Pod)

func pod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), Generation: 3,
		CreationTimestamp: metav1.NewTime(t0)}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func on(node string) podOpt           { return func(p *corev1.Pod) { p.Spec.NodeName = node } }
func phase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }
func age(sec int) podOpt {
	return func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(t0.Add(-time.Duration(sec) * time.Second)) }
}
func deleting(p *corev1.Pod) {
	t := metav1.NewTime(t0)
	p.DeletionTimestamp = &t
}
func evictedPod(p *corev1.Pod) { p.Status.Phase, p.Status.Reason = corev1.PodFailed, evictedReason }

func node(name string, ready bool, taints ...string) *corev1.Node {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}}}
	for _, k := range taints {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: k, Effect: corev1.TaintEffectNoExecute})
	}
	return n
}

func nodeMap(ns ...*corev1.Node) map[string]*corev1.Node {
	m := map[string]*corev1.Node{}
	for _, n := range ns {
		m[n.Name] = n
	}
	return m
}

// summary renders actions as "name:reason[:failed][:cond]".
func summary(as []Action) []string {
	var out []string
	for _, a := range as {
		s := fmt.Sprintf("%s:%s", a.Pod.Name, a.Reason)
		if a.MarkFailed {
			s += ":failed"
		}
		if a.Condition != nil {
			s += ":cond"
		}
		out = append(out, s)
	}
	return out
}

func TestPlan(t *testing.T) {
	oos := corev1.TaintNodeOutOfService
	tests := []struct {
		name      string
		pods      []*corev1.Pod
		nodes     map[string]*corev1.Node
		gone      map[string]bool
		threshold int
		want      []string
	}{
		{name: "nothing to do", pods: []*corev1.Pod{pod("a", on("n1")), pod("b")}, nodes: nodeMap(node("n1", true)), threshold: 1},
		{name: "terminated at threshold stay", threshold: 2,
			pods: []*corev1.Pod{pod("a", phase(corev1.PodSucceeded)), pod("b", phase(corev1.PodFailed)), pod("c")}},
		{name: "terminated over threshold go oldest first", threshold: 2,
			pods: []*corev1.Pod{pod("new", phase(corev1.PodSucceeded), age(1)), pod("old", phase(corev1.PodFailed), age(30)),
				pod("mid", phase(corev1.PodSucceeded), age(20)), pod("older", phase(corev1.PodSucceeded), age(40)), pod("run", age(99))},
			want: []string{"older:terminated", "old:terminated"}},
		{name: "evicted pods go first", threshold: 1,
			pods: []*corev1.Pod{pod("old", phase(corev1.PodFailed), age(50)), pod("ev", evictedPod, age(1)), pod("x", phase(corev1.PodSucceeded), age(40))},
			want: []string{"ev:terminated", "old:terminated"}},
		{name: "names break creation ties", threshold: 1,
			pods: []*corev1.Pod{pod("b", phase(corev1.PodSucceeded)), pod("a", phase(corev1.PodSucceeded)), pod("c", phase(corev1.PodSucceeded))},
			want: []string{"a:terminated", "b:terminated"}},
		{name: "threshold 0 disables terminated", threshold: 0,
			pods: []*corev1.Pod{pod("a", phase(corev1.PodSucceeded)), pod("b", phase(corev1.PodFailed))}},
		{name: "pending and unknown are not terminated", threshold: 1,
			pods: []*corev1.Pod{pod("a", phase(corev1.PodPending)), pod("b", phase(corev1.PodUnknown)), pod("c")}},
		{name: "orphan on gone node is failed with condition", threshold: 10,
			pods:  []*corev1.Pod{pod("a", on("ghost")), pod("b", on("ghost"), phase(corev1.PodSucceeded)), pod("c", on("n1"))},
			nodes: nodeMap(node("n1", true)), gone: map[string]bool{"ghost": true},
			want: []string{"a:orphaned:failed:cond", "b:orphaned:cond"}},
		{name: "missing node not yet confirmed gone is left alone",
			pods: []*corev1.Pod{pod("a", on("ghost"))}, gone: map[string]bool{"ghost": false}},
		{name: "node back in informer overrides gone",
			pods: []*corev1.Pod{pod("a", on("n1"))}, nodes: nodeMap(node("n1", true)), gone: map[string]bool{"n1": true}},
		{name: "terminating on not-ready out-of-service node",
			pods:  []*corev1.Pod{pod("a", on("n1"), deleting), pod("b", on("n1")), pod("c", on("n2"), deleting), pod("d", on("n3"), deleting)},
			nodes: nodeMap(node("n1", false, oos), node("n2", true, oos), node("n3", false, "other")),
			want:  []string{"a:out-of-service:failed"}},
		{name: "terminating unscheduled",
			pods:  []*corev1.Pod{pod("a", deleting), pod("b"), pod("c", deleting, on("n1")), pod("d", deleting, phase(corev1.PodFailed))},
			nodes: nodeMap(node("n1", true)),
			want:  []string{"a:unscheduled:failed", "d:unscheduled"}},
		{name: "a pod is collected once, first reason wins", threshold: 1,
			pods: []*corev1.Pod{pod("a", on("ghost"), phase(corev1.PodFailed), age(10)), pod("b", phase(corev1.PodFailed), deleting),
				pod("c", on("ghost"), phase(corev1.PodSucceeded))},
			gone: map[string]bool{"ghost": true},
			want: []string{"a:terminated", "b:terminated", "c:orphaned:cond"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := summary(Plan(Input{Pods: tc.pods, Nodes: tc.nodes, Gone: tc.gone, Threshold: tc.threshold, Now: t0}))
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestOrphanCondition(t *testing.T) {
	p := pod("a", on("ghost"))
	as := Plan(Input{Pods: []*corev1.Pod{p}, Gone: map[string]bool{"ghost": true}, Now: t0})
	if len(as) != 1 || as[0].Condition == nil {
		t.Fatalf("got %+v", as)
	}
	c := as[0].Condition
	if c.Type != corev1.DisruptionTarget || c.Status != corev1.ConditionTrue || c.Reason != "DeletionByPodGC" ||
		c.ObservedGeneration != 3 || !c.LastTransitionTime.Time.Equal(t0) {
		t.Errorf("condition %+v", c)
	}
	// An existing True condition keeps its transition time.
	earlier := metav1.NewTime(t0.Add(-time.Hour))
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, LastTransitionTime: earlier}}
	c = orphanCondition(p, t0)
	if !c.LastTransitionTime.Equal(&earlier) {
		t.Errorf("transition time %v, want %v", c.LastTransitionTime, earlier)
	}
}

func TestQuarantine(t *testing.T) {
	const wait = 40 * time.Second
	nodes := nodeMap(node("n1", true))
	ghost := []*corev1.Pod{pod("a", on("ghost")), pod("b", on("n1")), pod("c")}
	q := quarantine{}
	steps := []struct {
		at   time.Duration
		pods []*corev1.Pod
		want []string
	}{
		{0, ghost, nil},                // ghost enters
		{20 * time.Second, ghost, nil}, // still waiting
		{40 * time.Second, ghost, []string{"ghost"}},
		{60 * time.Second, ghost, nil}, // re-entered at 40s
		{80 * time.Second, ghost, []string{"ghost"}},
		{100 * time.Second, ghost[1:], nil}, // no pod points at it: dropped
		{140 * time.Second, ghost, nil},     // enters afresh
		{179 * time.Second, ghost, nil},
		{180 * time.Second, ghost, []string{"ghost"}},
	}
	for _, s := range steps {
		got := q.observe(s.pods, nodes, t0.Add(s.at), wait)
		if !slices.Equal(got, s.want) {
			t.Fatalf("at %v: due %q, want %q", s.at, got, s.want)
		}
		if _, ok := q["n1"]; ok {
			t.Fatalf("at %v: a known node is quarantined", s.at)
		}
	}
}

func TestQuarantineNodeReappears(t *testing.T) {
	q := quarantine{}
	pods := []*corev1.Pod{pod("a", on("n1")), pod("b", on("n2"))}
	if due := q.observe(pods, nil, t0, time.Second); due != nil {
		t.Fatalf("due %q", due)
	}
	// n1 shows up before its deadline: it leaves the quarantine.
	if due := q.observe(pods, nodeMap(node("n1", true)), t0.Add(2*time.Second), time.Second); !slices.Equal(due, []string{"n2"}) {
		t.Fatalf("due %q, want [n2]", due)
	}
	if _, ok := q["n1"]; ok {
		t.Fatal("n1 still quarantined")
	}
	// Gone again: a fresh quarantine, not the old deadline.
	if due := q.observe(pods[:1], nil, t0.Add(3*time.Second), time.Second); !slices.Equal(due, nil) {
		t.Fatalf("due %q, want none", due)
	}
	if due := q.observe(pods[:1], nil, t0.Add(4*time.Second), time.Second); !slices.Equal(due, []string{"n1"}) {
		t.Fatalf("due %q, want [n1]", due)
	}
}
