package nodelifecycle

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func TestMarkStatusUnknown(t *testing.T) {
	created, now := metav1.NewTime(t0), metav1.NewTime(t0.Add(time.Hour))
	hb := metav1.NewTime(t0.Add(time.Minute))
	status := corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: hb, LastTransitionTime: created, Reason: "KubeletReady"},
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: hb},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionUnknown, Reason: "already", LastTransitionTime: created},
		{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse},
	}}
	if !markStatusUnknown(&status, created, now) {
		t.Fatal("no change reported")
	}
	ready := findCondition(status.Conditions, corev1.NodeReady)
	if ready.Status != corev1.ConditionUnknown || ready.Reason != reasonNodeStatusUnknown || ready.Message != msgStoppedPosting ||
		!ready.LastHeartbeatTime.Equal(&hb) || !ready.LastTransitionTime.Equal(&now) {
		t.Errorf("ready %+v", ready)
	}
	if d := findCondition(status.Conditions, corev1.NodeDiskPressure); d.Reason != "already" || !d.LastTransitionTime.Equal(&created) {
		t.Errorf("an Unknown condition was rewritten: %+v", d)
	}
	if p := findCondition(status.Conditions, corev1.NodePIDPressure); p == nil || p.Reason != reasonNodeStatusNeverUpdated || p.Message != msgNeverPosted {
		t.Errorf("missing PIDPressure not added: %+v", p)
	}
	if n := findCondition(status.Conditions, corev1.NodeNetworkUnavailable); n.Status != corev1.ConditionFalse {
		t.Errorf("NetworkUnavailable touched: %+v", n)
	}
	if markStatusUnknown(&status, created, now) {
		t.Error("second pass changed status")
	}
}

func TestDecideNoExecute(t *testing.T) {
	u, nr := unreachableNoExecute, notReadyNoExecute
	other := corev1.Taint{Key: "dedicated", Effect: corev1.TaintEffectNoExecute}
	for _, tc := range []struct {
		ready  corev1.ConditionStatus
		taints []corev1.Taint
		action noExecuteAction
		want   string
	}{
		{corev1.ConditionTrue, nil, noExecuteNone, ""},
		{corev1.ConditionTrue, []corev1.Taint{other}, noExecuteNone, ""},
		{corev1.ConditionTrue, []corev1.Taint{u}, noExecuteRemove, ""},
		{corev1.ConditionTrue, []corev1.Taint{nr}, noExecuteRemove, ""},
		{corev1.ConditionUnknown, nil, noExecuteAdd, u.Key},
		{corev1.ConditionUnknown, []corev1.Taint{u}, noExecuteNone, ""},
		{corev1.ConditionUnknown, []corev1.Taint{nr}, noExecuteSwap, u.Key},
		{corev1.ConditionFalse, nil, noExecuteAdd, nr.Key},
		{corev1.ConditionFalse, []corev1.Taint{nr}, noExecuteNone, ""},
		{corev1.ConditionFalse, []corev1.Taint{u}, noExecuteSwap, nr.Key},
		// A NoSchedule taint of the same key is not the NoExecute one.
		{corev1.ConditionFalse, []corev1.Taint{{Key: nr.Key, Effect: corev1.TaintEffectNoSchedule}}, noExecuteAdd, nr.Key},
	} {
		a, w := decideNoExecute(tc.ready, tc.taints)
		if a != tc.action || w.Key != tc.want {
			t.Errorf("%s %v: got %v %q, want %v %q", tc.ready, tc.taints, a, w.Key, tc.action, tc.want)
		}
	}
}

func TestSetNoExecute(t *testing.T) {
	old := metav1.NewTime(t0)
	keep := corev1.Taint{Key: "x", Effect: corev1.TaintEffectNoSchedule}
	u := unreachableNoExecute
	u.TimeAdded = &old
	// Swap unreachable for not-ready: new timeAdded, others kept.
	out, changed := setNoExecute([]corev1.Taint{keep, u}, notReadyNoExecute, t0.Add(time.Minute))
	if !changed || len(out) != 2 || out[0] != keep || out[1].Key != corev1.TaintNodeNotReady || !out[1].TimeAdded.Time.Equal(t0.Add(time.Minute)) {
		t.Fatalf("swap: %v", out)
	}
	// Already present: its timeAdded survives.
	out, changed = setNoExecute([]corev1.Taint{u}, unreachableNoExecute, t0.Add(time.Hour))
	if changed || !out[0].TimeAdded.Equal(&old) {
		t.Fatalf("keep: %v %v", out, changed)
	}
	// Remove.
	out, changed = setNoExecute([]corev1.Taint{keep, u}, corev1.Taint{}, t0)
	if !changed || len(out) != 1 || out[0] != keep {
		t.Fatalf("remove: %v", out)
	}
}

func TestNoScheduleTaints(t *testing.T) {
	cond := func(ty corev1.NodeConditionType, s corev1.ConditionStatus) corev1.NodeCondition {
		return corev1.NodeCondition{Type: ty, Status: s}
	}
	for _, tc := range []struct {
		conds []corev1.NodeCondition
		unsch bool
		want  string
	}{
		{[]corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionTrue), cond(corev1.NodeMemoryPressure, corev1.ConditionFalse)}, false, "[]"},
		{[]corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionFalse)}, false, "[node.kubernetes.io/not-ready]"},
		{[]corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionUnknown), cond(corev1.NodeDiskPressure, corev1.ConditionUnknown)}, false, "[node.kubernetes.io/unreachable]"},
		{[]corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionTrue), cond(corev1.NodeMemoryPressure, corev1.ConditionTrue),
			cond(corev1.NodeDiskPressure, corev1.ConditionTrue), cond(corev1.NodePIDPressure, corev1.ConditionTrue),
			cond(corev1.NodeNetworkUnavailable, corev1.ConditionTrue)}, true,
			"[node.kubernetes.io/disk-pressure node.kubernetes.io/memory-pressure node.kubernetes.io/network-unavailable node.kubernetes.io/pid-pressure node.kubernetes.io/unschedulable]"},
	} {
		n := &corev1.Node{Spec: corev1.NodeSpec{Unschedulable: tc.unsch}, Status: corev1.NodeStatus{Conditions: tc.conds}}
		if got := fmt.Sprint(noScheduleTaints(n)); got != tc.want {
			t.Errorf("got %s want %s", got, tc.want)
		}
	}
}

func TestSetNoSchedule(t *testing.T) {
	user := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	ne := unreachableNoExecute
	cur := []corev1.Taint{user, ne, {Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}}
	out, changed := setNoSchedule(cur, []string{corev1.TaintNodeUnreachable})
	want := "[{dedicated gpu NoSchedule <nil>} {node.kubernetes.io/unreachable  NoExecute <nil>} {node.kubernetes.io/unreachable  NoSchedule <nil>}]"
	if !changed || fmt.Sprint(out) != want {
		t.Fatalf("got %v", out)
	}
	if _, changed := setNoSchedule(out, []string{corev1.TaintNodeUnreachable}); changed {
		t.Fatal("stable input changed")
	}
}

func TestZoneStateAndRate(t *testing.T) {
	T, F, U := corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown
	for _, tc := range []struct {
		conds []corev1.ConditionStatus
		want  zoneState
	}{
		{[]corev1.ConditionStatus{T}, zoneNormal},
		{[]corev1.ConditionStatus{U}, zoneFullDisruption},
		{[]corev1.ConditionStatus{T, U}, zoneNormal},
		{[]corev1.ConditionStatus{T, U, F}, zoneNormal},                  // two not ready: never partial
		{[]corev1.ConditionStatus{T, T, U, F, U}, zonePartialDisruption}, // 3/5 = 60%
		{[]corev1.ConditionStatus{T, T, T, U, F, U}, zoneNormal},         // 50%
	} {
		if got := computeZoneState(tc.conds); got != tc.want {
			t.Errorf("%v: got %v want %v", tc.conds, got, tc.want)
		}
	}
	if r := taintRate(zonePartialDisruption, 10, 0.1, 0.01); r != 0 {
		t.Errorf("small cluster partial: %v", r)
	}
	if r := taintRate(zonePartialDisruption, 100, 0.1, 0.01); r != 0.01 {
		t.Errorf("large cluster partial: %v", r)
	}
	if r := taintRate(zoneFullDisruption, 10, 0.1, 0.01); r != 0.1 {
		t.Errorf("full: %v", r)
	}
}

func TestEvictionTime(t *testing.T) {
	secs := func(s int64) *int64 { return &s }
	added := metav1.NewTime(t0)
	unreach := corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: &added}
	later := metav1.NewTime(t0.Add(100 * time.Second))
	notReady := corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute, TimeAdded: &later}
	noSched := corev1.Taint{Key: "x", Effect: corev1.TaintEffectNoSchedule}
	tolU := func(s *int64) corev1.Toleration {
		return corev1.Toleration{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: s}
	}
	tolNR := func(s *int64) corev1.Toleration {
		return corev1.Toleration{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: s}
	}
	never := time.Time{}
	noAdded := func(corev1.Taint) time.Time { return t0.Add(time.Hour) }
	for _, tc := range []struct {
		name   string
		tols   []corev1.Toleration
		taints []corev1.Taint
		evict  bool
		at     time.Time
	}{
		{"no taints", nil, nil, false, never},
		{"NoSchedule only", nil, []corev1.Taint{noSched}, false, never},
		{"untolerated: now", nil, []corev1.Taint{unreach}, true, never},
		{"tolerated forever", []corev1.Toleration{tolU(nil)}, []corev1.Taint{unreach}, false, never},
		{"tolerate everything", []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, []corev1.Taint{unreach, notReady}, false, never},
		{"zero seconds: at timeAdded", []corev1.Toleration{tolU(secs(0))}, []corev1.Taint{unreach}, true, t0},
		{"negative seconds: at timeAdded", []corev1.Toleration{tolU(secs(-5))}, []corev1.Taint{unreach}, true, t0},
		{"300 seconds", []corev1.Toleration{tolU(secs(300))}, []corev1.Taint{unreach}, true, t0.Add(300 * time.Second)},
		{"one of two untolerated", []corev1.Toleration{tolU(secs(300))}, []corev1.Taint{unreach, notReady}, true, never},
		{"earliest deadline", []corev1.Toleration{tolU(secs(300)), tolNR(secs(60))}, []corev1.Taint{unreach, notReady}, true, t0.Add(160 * time.Second)},
		{"forever on one, limit on other", []corev1.Toleration{tolU(nil), tolNR(secs(60))}, []corev1.Taint{unreach, notReady}, true, t0.Add(160 * time.Second)},
		{"first matching toleration wins", []corev1.Toleration{tolU(secs(10)), tolU(nil)}, []corev1.Taint{unreach}, true, t0.Add(10 * time.Second)},
		{"toleration for another effect", []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			[]corev1.Taint{unreach}, true, never},
		{"no timeAdded uses first seen", []corev1.Toleration{tolU(secs(30))},
			[]corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}}, true, t0.Add(time.Hour + 30*time.Second)},
	} {
		at, evict := evictionTime(tc.tols, tc.taints, func(t corev1.Taint) time.Time {
			if t.TimeAdded != nil {
				return t.TimeAdded.Time
			}
			return noAdded(t)
		})
		if evict != tc.evict || !at.Equal(tc.at) {
			t.Errorf("%s: got %v %v, want %v %v", tc.name, evict, at, tc.evict, tc.at)
		}
	}
}
