package plugins

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/controlplane/scheduler/framework"
)

func TestLeastAllocated(t *testing.T) {
	for _, tc := range []struct {
		name     string
		existing []*corev1.Pod
		pod      *corev1.Pod
		want     int64
	}{
		{"empty node, half cpu half memory", nil, pod("p", nil, "2", "4Gi"), 50},
		{"cpu full, memory free", nil, pod("p", nil, "4", "0"), 50},
		{"after existing pods", []*corev1.Pod{pod("e", nil, "1", "2Gi")}, pod("p", nil, "1", "2Gi"), 50},
		// No requests count as 100m and 200Mi.
		{"defaults for best effort", nil, pod("p", nil, "", ""), (3900*100/4000 + (8192-200)*100/8192) / 2},
		{"over capacity", nil, pod("p", nil, "8", "16Gi"), 0},
	} {
		got := LeastAllocated(framework.NewPodInfo(tc.pod), ni(node("n", nil, "4", "8Gi", 110), tc.existing...))
		if got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestBalancedAllocation(t *testing.T) {
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want int64
	}{
		{"balanced", pod("p", nil, "2", "4Gi"), 100},
		{"cpu only", pod("p", nil, "2", "0"), 75},
		{"all cpu, no memory", pod("p", nil, "4", "0"), 50},
	} {
		got := BalancedAllocation(framework.NewPodInfo(tc.pod), ni(node("n", nil, "4", "8Gi", 110)))
		if got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, got, tc.want)
		}
	}
}

func owned(p *corev1.Pod, uid string) *corev1.Pod {
	yes := true
	p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs", UID: types.UID(uid), Controller: &yes}}
	return p
}

func TestOwnerSpread(t *testing.T) {
	nodes := []*framework.NodeInfo{
		ni(zoneNode("n1", "a"), owned(pod("a", nil, "", ""), "rs1"), owned(pod("b", nil, "", ""), "rs1")),
		ni(zoneNode("n2", "a"), owned(pod("c", nil, "", ""), "rs2")),
		ni(zoneNode("n3", "b")),
	}
	for _, tc := range []struct {
		name string
		uid  string
		// raw scores, then normalized
		raw, norm []int64
	}{
		// n1: node 0, zone a has 2 of max 2 -> 0; n2: node 100, zone 0 -> 33; n3: 100, 100.
		{"same owner", "rs1", []int64{2, 0, 0}, []int64{0, 33, 100}},
		{"other owner", "rs2", []int64{0, 1, 0}, []int64{33, 0, 100}},
		{"new owner", "rs3", []int64{0, 0, 0}, []int64{100, 100, 100}},
	} {
		p := framework.NewPodInfo(owned(pod("p", nil, "", ""), tc.uid))
		raw := make([]int64, len(nodes))
		for i, n := range nodes {
			raw[i] = OwnerSpread(p, n)
		}
		if !reflect.DeepEqual(raw, tc.raw) {
			t.Errorf("%s: raw %v, want %v", tc.name, raw, tc.raw)
		}
		NormalizeOwnerSpread(nodes, raw)
		if !reflect.DeepEqual(raw, tc.norm) {
			t.Errorf("%s: normalized %v, want %v", tc.name, raw, tc.norm)
		}
	}
}

func TestPreferredNodeAffinity(t *testing.T) {
	p := pod("p", nil, "", "")
	pref := func(w int32, zone string) corev1.PreferredSchedulingTerm {
		return corev1.PreferredSchedulingTerm{Weight: w, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}}}}
	}
	p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{pref(10, "a"), pref(30, "b")}}}
	pi := framework.NewPodInfo(p)
	nodes := []*framework.NodeInfo{ni(zoneNode("n1", "a")), ni(zoneNode("n2", "b")), ni(zoneNode("n3", "c"))}
	scores := make([]int64, 3)
	for i, n := range nodes {
		scores[i] = PreferredNodeAffinity(pi, n)
	}
	if !reflect.DeepEqual(scores, []int64{10, 30, 0}) {
		t.Fatalf("raw %v", scores)
	}
	NormalizeMax(scores, false)
	if !reflect.DeepEqual(scores, []int64{33, 100, 0}) {
		t.Errorf("normalized %v", scores)
	}
}

func TestPreferNoScheduleTaints(t *testing.T) {
	soft := corev1.Taint{Key: "k", Value: "v", Effect: corev1.TaintEffectPreferNoSchedule}
	hard := corev1.Taint{Key: "h", Effect: corev1.TaintEffectNoSchedule}
	mk := func(taints ...corev1.Taint) *framework.NodeInfo {
		n := node("n", nil, "1", "1Gi", 10)
		n.Spec.Taints = taints
		return ni(n)
	}
	plain := pod("p", nil, "", "")
	tolerant := pod("p", nil, "", "")
	tolerant.Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectPreferNoSchedule}}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		node *framework.NodeInfo
		want int64
	}{
		{"no taints", plain, mk(), 0},
		{"one soft taint", plain, mk(soft, hard), 1},
		{"tolerated", tolerant, mk(soft), 0},
	} {
		if got := PreferNoScheduleTaints(tc.pod, tc.node); got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, got, tc.want)
		}
	}
	scores := []int64{0, 1, 2}
	NormalizeMax(scores, true)
	if !reflect.DeepEqual(scores, []int64{100, 50, 0}) {
		t.Errorf("reverse normalized %v", scores)
	}
}

func TestScorerWeights(t *testing.T) {
	nodes := []*framework.NodeInfo{ni(zoneNode("n1", "a"), owned(pod("a", nil, "1", "1Gi"), "rs")), ni(zoneNode("n2", "b"))}
	st := PreFilter(framework.NewPodInfo(owned(pod("p", nil, "1", "1Gi"), "rs")), nodes, false)
	w := CompileWeights(nil)
	sc := NewScorer(st, w, len(nodes))
	for i, n := range nodes {
		sc.Raw(i, n)
	}
	total := sc.Total(nodes)
	if total[1] <= total[0] {
		t.Errorf("totals %v: the empty node without the owner's pod should win", total)
	}
	off := CompileWeights(map[string]int32{LeastAllocatedName: 0, BalancedAllocationName: 0, SelectorSpreadName: 0, TaintTolerationName: 0})
	sc = NewScorer(st, off, len(nodes))
	for i, n := range nodes {
		sc.Raw(i, n)
	}
	if total := sc.Total(nodes); !reflect.DeepEqual(total, []int64{0, 0}) {
		t.Errorf("all weights 0: totals %v", total)
	}
}
