package plugins

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/controlplane/scheduler/framework"
)

func zoneNode(name, zone string) *corev1.Node {
	return node(name, map[string]string{"zone": zone, "host": name, corev1.LabelTopologyZone: zone}, "4", "8Gi", 110)
}

func affinityTerm(key string, app string) corev1.PodAffinityTerm {
	return corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}
}

func TestInterPodAffinity(t *testing.T) {
	db := pod("db", map[string]string{"app": "db"}, "", "")
	// cluster: zone a = {n1 (db), n2}, zone b = {n3}
	build := func(existing ...*corev1.Pod) []*framework.NodeInfo {
		return []*framework.NodeInfo{ni(zoneNode("n1", "a"), existing...), ni(zoneNode("n2", "a")), ni(zoneNode("n3", "b"))}
	}
	withAffinity := func(aff, anti []corev1.PodAffinityTerm, labels map[string]string) *corev1.Pod {
		p := pod("p", labels, "", "")
		p.Spec.Affinity = &corev1.Affinity{}
		if aff != nil {
			p.Spec.Affinity.PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: aff}
		}
		if anti != nil {
			p.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: anti}
		}
		return p
	}
	antiDB := withAffinity(nil, []corev1.PodAffinityTerm{affinityTerm("zone", "web")}, map[string]string{"app": "db"})
	for _, tc := range []struct {
		name     string
		pod      *corev1.Pod
		existing []*corev1.Pod
		want     [3][]string // per node n1, n2, n3
	}{
		{"no affinity", pod("p", nil, "", ""), []*corev1.Pod{db}, [3][]string{}},
		{"affinity to db zone", withAffinity([]corev1.PodAffinityTerm{affinityTerm("zone", "db")}, nil, nil), []*corev1.Pod{db},
			[3][]string{nil, nil, {ReasonAffinity}}},
		{"affinity to db host", withAffinity([]corev1.PodAffinityTerm{affinityTerm("host", "db")}, nil, nil), []*corev1.Pod{db},
			[3][]string{nil, {ReasonAffinity}, {ReasonAffinity}}},
		{"first of its group", withAffinity([]corev1.PodAffinityTerm{affinityTerm("zone", "web")}, nil, map[string]string{"app": "web"}), []*corev1.Pod{db},
			[3][]string{}},
		{"affinity nobody matches", withAffinity([]corev1.PodAffinityTerm{affinityTerm("zone", "cache")}, nil, nil), []*corev1.Pod{db},
			[3][]string{{ReasonAffinity}, {ReasonAffinity}, {ReasonAffinity}}},
		{"anti-affinity to db zone", withAffinity(nil, []corev1.PodAffinityTerm{affinityTerm("zone", "db")}, nil), []*corev1.Pod{db},
			[3][]string{{ReasonAntiAffinity}, {ReasonAntiAffinity}, nil}},
		{"existing pod's anti-affinity", pod("p", map[string]string{"app": "web"}, "", ""), []*corev1.Pod{antiDB},
			[3][]string{{ReasonExistingAntiAffinity}, {ReasonExistingAntiAffinity}, nil}},
		{"existing anti-affinity other app", pod("p", map[string]string{"app": "api"}, "", ""), []*corev1.Pod{antiDB},
			[3][]string{}},
	} {
		nodes := build(tc.existing...)
		p := framework.NewPodInfo(tc.pod)
		st := PreFilterInterPod(p, nodes)
		for i, n := range nodes {
			if got := InterPodAffinity(p, st, n); !reflect.DeepEqual(got, tc.want[i]) {
				t.Errorf("%s: node %s: got %v, want %v", tc.name, n.Name(), got, tc.want[i])
			}
		}
	}
}

func spreadPod(name string, hard bool, maxSkew int32, key string) *corev1.Pod {
	p := pod(name, map[string]string{"app": "web"}, "", "")
	when := corev1.ScheduleAnyway
	if hard {
		when = corev1.DoNotSchedule
	}
	p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew: maxSkew, TopologyKey: key, WhenUnsatisfiable: when,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
	}}
	return p
}

func TestPodTopologySpreadFilter(t *testing.T) {
	web := func(n string) *corev1.Pod { return pod(n, map[string]string{"app": "web"}, "", "") }
	// zone a: n1 (2 web), n2 (0); zone b: n3 (0); n4 has no zone label.
	nodes := []*framework.NodeInfo{
		ni(zoneNode("n1", "a"), web("w1"), web("w2")), ni(zoneNode("n2", "a")), ni(zoneNode("n3", "b")),
		ni(node("n4", map[string]string{"host": "n4"}, "4", "8Gi", 110)),
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want [4][]string
	}{
		{"zone skew 1", spreadPod("p", true, 1, "zone"), [4][]string{{ReasonSpread}, {ReasonSpread}, nil, {ReasonSpreadMissingLabel}}},
		{"zone skew 3", spreadPod("p", true, 3, "zone"), [4][]string{nil, nil, nil, {ReasonSpreadMissingLabel}}},
		{"host skew 1", spreadPod("p", true, 1, "host"), [4][]string{{ReasonSpread}, nil, nil, nil}},
		{"soft constraints do not filter", spreadPod("p", false, 1, "zone"), [4][]string{}},
	} {
		p := framework.NewPodInfo(tc.pod)
		st := PreFilterSpread(p, nodes, true)
		for i, n := range nodes {
			if got := PodTopologySpread(p, st, n); !reflect.DeepEqual(got, tc.want[i]) {
				t.Errorf("%s: node %s: got %v, want %v", tc.name, n.Name(), got, tc.want[i])
			}
		}
	}
}

func TestSpreadScore(t *testing.T) {
	web := func(n string) *corev1.Pod { return pod(n, map[string]string{"app": "web"}, "", "") }
	nodes := []*framework.NodeInfo{
		ni(zoneNode("n1", "a"), web("w1"), web("w2")), ni(zoneNode("n2", "a")), ni(zoneNode("n3", "b")),
		ni(node("n4", map[string]string{"host": "n4"}, "4", "8Gi", 110)),
	}
	p := framework.NewPodInfo(spreadPod("p", false, 1, "zone"))
	st := PreFilterSpread(p, nodes, false)
	scores := make([]int64, len(nodes))
	for i, n := range nodes {
		scores[i] = SpreadScore(st, n)
	}
	NormalizeSpread(scores)
	if !(scores[2] == MaxNodeScore && scores[0] == scores[1] && scores[0] < scores[2] && scores[3] == 0) {
		t.Errorf("scores %v: want zone b best, zone a equal and lower, unlabeled 0", scores)
	}
}
