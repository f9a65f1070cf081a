package deployment

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func pint(v int) *intstr.IntOrString    { x := intstr.FromInt32(int32(v)); return &x }
func pstr(v string) *intstr.IntOrString { x := intstr.FromString(v); return &x }

// rolling builds a RollingUpdate Deployment.
func rolling(replicas int32, surge, unavailable *intstr.IntOrString) *appsv1.Deployment {
	return &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: &replicas, Strategy: appsv1.DeploymentStrategy{
		Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: surge, MaxUnavailable: unavailable}}}}
}

// rs builds a ReplicaSet of spec size n with available pods, created age
// seconds after t0, with a max-replicas annotation if maxReplicas > 0.
func rs(name string, n, available int32, age int, maxReplicas int32) *appsv1.ReplicaSet {
	r := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name), CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(age) * time.Second))},
		Spec:       appsv1.ReplicaSetSpec{Replicas: &n},
		Status:     appsv1.ReplicaSetStatus{Replicas: n, ReadyReplicas: available, AvailableReplicas: available},
	}
	if maxReplicas > 0 {
		r.Annotations = map[string]string{MaxReplicasAnnotation: strconv.Itoa(int(maxReplicas))}
	}
	return r
}

func TestResolveFenceposts(t *testing.T) {
	tests := []struct {
		surge, unavailable *intstr.IntOrString
		desired            int32
		wantS, wantU       int32
	}{
		{pstr("25%"), pstr("25%"), 10, 3, 2}, // surge rounds up, unavailable down
		{pstr("25%"), pstr("25%"), 1, 1, 0},
		{pstr("25%"), pstr("25%"), 4, 1, 1},
		{pint(0), pstr("10%"), 5, 0, 1}, // both zero after rounding: unavailable 1
		{pint(0), pint(0), 3, 0, 1},
		{nil, nil, 3, 0, 1},
		{pint(2), pint(1), 10, 2, 1},
		{pstr("50%"), pstr("0%"), 3, 2, 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v/%v of %d", tt.surge, tt.unavailable, tt.desired), func(t *testing.T) {
			s, u, err := resolveFenceposts(tt.surge, tt.unavailable, tt.desired)
			if err != nil || s != tt.wantS || u != tt.wantU {
				t.Fatalf("got %d, %d, %v; want %d, %d", s, u, err, tt.wantS, tt.wantU)
			}
		})
	}
}

func TestMaxSurgeAndUnavailable(t *testing.T) {
	d := rolling(3, pint(1), pint(5))
	if maxUnavailable(d) != 3 || maxSurge(d) != 1 {
		t.Fatalf("maxUnavailable %d (want clamped to 3), maxSurge %d", maxUnavailable(d), maxSurge(d))
	}
	d = rolling(0, pint(1), pint(1))
	if maxUnavailable(d) != 0 {
		t.Fatalf("maxUnavailable of 0 replicas: %d", maxUnavailable(d))
	}
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	if maxUnavailable(d) != 0 || maxSurge(d) != 0 {
		t.Fatal("Recreate has no surge or unavailability")
	}
}

func TestNewRSNewReplicas(t *testing.T) {
	recreate := rolling(5, nil, nil)
	recreate.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	tests := []struct {
		name string
		d    *appsv1.Deployment
		old  int32
		new  int32
		want int32
	}{
		{"surge 2 of 10", rolling(10, pint(2), pint(0)), 10, 0, 2},
		{"surge 25% of 10 rounds up", rolling(10, pstr("25%"), pint(0)), 10, 0, 3},
		{"at max total", rolling(10, pint(2), pint(0)), 10, 2, 2},
		{"capped at replicas", rolling(10, pint(5), pint(0)), 2, 8, 10},
		{"fresh deployment", rolling(3, pstr("25%"), pstr("25%")), 0, 0, 3},
		{"recreate takes all", recreate, 0, 0, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, n := rs("old", tt.old, tt.old, 0, 0), rs("new", tt.new, 0, 1, 0)
			got, err := newRSNewReplicas(tt.d, []*appsv1.ReplicaSet{o, n}, n)
			if err != nil || got != tt.want {
				t.Fatalf("got %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

func TestRollingScaleDownPlan(t *testing.T) {
	tests := []struct {
		name string
		d    *appsv1.Deployment
		olds []*appsv1.ReplicaSet
		new  *appsv1.ReplicaSet
		want map[string]int32
	}{
		{"one step within maxUnavailable", rolling(4, pint(1), pint(1)),
			[]*appsv1.ReplicaSet{rs("old", 4, 4, 0, 0)}, rs("new", 1, 0, 9, 0), map[string]int32{"old": 3}},
		{"new pods available free more", rolling(4, pint(1), pint(1)),
			[]*appsv1.ReplicaSet{rs("old", 3, 3, 0, 0)}, rs("new", 2, 2, 9, 0), map[string]int32{"old": 1}},
		{"unhealthy old pods go first, no more below minimum", rolling(4, pint(1), pint(1)),
			[]*appsv1.ReplicaSet{rs("old", 4, 2, 0, 0)}, rs("new", 1, 0, 9, 0), map[string]int32{"old": 3}},
		{"no unavailability budget", rolling(3, pint(1), pint(0)),
			[]*appsv1.ReplicaSet{rs("old", 3, 3, 0, 0)}, rs("new", 1, 0, 9, 0), map[string]int32{}},
		{"oldest old replicaset first", rolling(4, pint(0), pint(2)),
			[]*appsv1.ReplicaSet{rs("old2", 2, 2, 5, 0), rs("old1", 2, 2, 0, 0)}, rs("new", 0, 0, 9, 0), map[string]int32{"old1": 0}},
		{"nothing old", rolling(4, pint(1), pint(1)), nil, rs("new", 4, 4, 9, 0), map[string]int32{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			all := append(append([]*appsv1.ReplicaSet(nil), tt.olds...), tt.new)
			plan := rollingScaleDownPlan(tt.d, all, filterActive(tt.olds), tt.new)
			got := map[string]int32{}
			for _, s := range plan {
				got[s.rs.Name] = s.replicas
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("plan %v, want %v", got, tt.want)
			}
		})
	}
}

func TestProportionalScalePlan(t *testing.T) {
	tests := []struct {
		name   string
		d      *appsv1.Deployment
		rss    []*appsv1.ReplicaSet
		want   []string // name=size in scaling order
		wantOp string
	}{
		{"5 to 10", rolling(10, pint(0), pint(1)),
			[]*appsv1.ReplicaSet{rs("old", 3, 3, 0, 5), rs("new", 2, 0, 1, 5)}, []string{"old=6", "new=4"}, "up"},
		{"10 to 5", rolling(5, pint(0), pint(1)),
			[]*appsv1.ReplicaSet{rs("old", 6, 6, 0, 10), rs("new", 4, 0, 1, 10)}, []string{"old=3", "new=2"}, "down"},
		{"leftover to the newest of equals when growing", rolling(4, pint(0), pint(1)),
			[]*appsv1.ReplicaSet{rs("a", 1, 1, 0, 3), rs("b", 1, 1, 1, 3), rs("c", 1, 1, 2, 3)}, []string{"c=2", "b=1", "a=1"}, "up"},
		{"leftover to the oldest of equals when shrinking", rolling(2, pint(0), pint(1)),
			[]*appsv1.ReplicaSet{rs("a", 1, 1, 0, 3), rs("b", 1, 1, 1, 3), rs("c", 1, 1, 2, 3)}, []string{"a=0", "b=1", "c=1"}, "down"},
		{"to zero", rolling(0, pint(1), pint(1)),
			[]*appsv1.ReplicaSet{rs("old", 3, 3, 0, 6), rs("new", 2, 0, 1, 6)}, []string{"old=0", "new=0"}, "down"},
		{"surge counts towards the allowed size", rolling(10, pint(2), pint(0)),
			[]*appsv1.ReplicaSet{rs("old", 3, 3, 0, 6), rs("new", 3, 0, 1, 6)}, []string{"new=6", "old=6"}, "up"},
		{"no change", rolling(5, pint(0), pint(1)),
			[]*appsv1.ReplicaSet{rs("old", 3, 3, 0, 5), rs("new", 2, 0, 1, 5)}, []string{"old=3", "new=2"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, op := proportionalScalePlan(tt.d, tt.rss)
			var got []string
			for _, s := range plan {
				got = append(got, fmt.Sprintf("%s=%d", s.rs.Name, s.replicas))
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) || op != tt.wantOp {
				t.Fatalf("plan %v %q, want %v %q", got, op, tt.want, tt.wantOp)
			}
		})
	}
}

func TestFindActiveOrLatestAndSaturation(t *testing.T) {
	old1, old2 := rs("old1", 0, 0, 0, 0), rs("old2", 0, 0, 1, 0)
	if got := findActiveOrLatest(nil, []*appsv1.ReplicaSet{old1, old2}); got != old2 {
		t.Fatalf("no active: got %v, want the newest old", got.Name)
	}
	newRS := rs("new", 3, 3, 2, 0)
	if got := findActiveOrLatest(newRS, []*appsv1.ReplicaSet{old1, old2}); got != newRS {
		t.Fatalf("one active: got %v", got.Name)
	}
	if got := findActiveOrLatest(newRS, []*appsv1.ReplicaSet{rs("x", 1, 1, 0, 0)}); got != nil {
		t.Fatalf("two active: got %v", got.Name)
	}
	d := rolling(3, pint(1), pint(0))
	if isSaturated(d, newRS) {
		t.Fatal("saturated without desired-replicas annotation")
	}
	newRS.Annotations = map[string]string{DesiredReplicasAnnotation: "3"}
	if !isSaturated(d, newRS) {
		t.Fatal("not saturated")
	}
}

func TestComputeHash(t *testing.T) {
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "nginx"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx:1.14.2"}}}}
	one := int32(1)
	// Pinned: a change of hash renames every ReplicaSet on upgrade. The dump
	// covers every field of the k8s.io/api types, so a new API version (as
	// upstream) changes the values: these are for k8s.io/api v0.37.
	if h := ComputeHash(&tmpl, nil); h != "b48fcb456" {
		t.Fatalf("hash %s", h)
	}
	if h := ComputeHash(&tmpl, &one); h != "5f75fd569" {
		t.Fatalf("hash with collisionCount 1: %s", h)
	}
	other := tmpl.DeepCopy()
	other.Spec.Containers[0].Image = "nginx:1.15"
	if ComputeHash(other, nil) == ComputeHash(&tmpl, nil) {
		t.Fatal("different templates hash the same")
	}
}

func TestFindNewReplicaSetIgnoresHash(t *testing.T) {
	d := rolling(1, nil, nil)
	d.Spec.Template.Labels = map[string]string{"app": "a"}
	d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", Image: "A"}}
	a1, a2, b := rs("a1", 0, 0, 0, 0), rs("a2", 0, 0, 1, 0), rs("b", 0, 0, 2, 0)
	for _, r := range []*appsv1.ReplicaSet{a1, a2, b} {
		r.Spec.Template = *d.Spec.Template.DeepCopy()
		r.Spec.Template.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = r.Name
	}
	b.Spec.Template.Spec.Containers[0].Image = "B"
	if got := findNewReplicaSet(d, []*appsv1.ReplicaSet{b, a2, a1}); got != a1 {
		t.Fatalf("got %v, want the oldest match a1", got)
	}
	if olds := oldReplicaSets([]*appsv1.ReplicaSet{b, a2, a1}, a1); len(olds) != 2 {
		t.Fatalf("olds %v", olds)
	}
}

func TestSetNewReplicaSetAnnotations(t *testing.T) {
	d := rolling(3, pint(1), pint(0))
	d.Annotations = map[string]string{"team": "x", RevisionAnnotation: "7", lastAppliedAnnotation: "{}"}
	fresh := rs("new", 0, 0, 0, 0)
	if !setNewReplicaSetAnnotations(d, fresh, 1, false) {
		t.Fatal("no change reported")
	}
	want := map[string]string{"team": "x", RevisionAnnotation: "1", DesiredReplicasAnnotation: "3", MaxReplicasAnnotation: "4"}
	if fmt.Sprint(fresh.Annotations) != fmt.Sprint(want) {
		t.Fatalf("annotations %v, want %v", fresh.Annotations, want)
	}
	// Rolling back to revision 1 as revision 3 keeps "1" in the history.
	if !setNewReplicaSetAnnotations(d, fresh, 3, true) || fresh.Annotations[RevisionAnnotation] != "3" || fresh.Annotations[RevisionHistoryAnnotation] != "1" {
		t.Fatalf("after rollback %v", fresh.Annotations)
	}
	setNewReplicaSetAnnotations(d, fresh, 5, true)
	if fresh.Annotations[RevisionHistoryAnnotation] != "1,3" {
		t.Fatalf("history %q", fresh.Annotations[RevisionHistoryAnnotation])
	}
	if setNewReplicaSetAnnotations(d, fresh, 2, true) {
		t.Fatal("a lower revision must not change the replicaset")
	}
}

func TestCleanupPlan(t *testing.T) {
	limit := int32(1)
	d := rolling(1, nil, nil)
	d.Spec.RevisionHistoryLimit = &limit
	withRev := func(r *appsv1.ReplicaSet, rev string) *appsv1.ReplicaSet {
		r.Annotations = map[string]string{RevisionAnnotation: rev}
		return r
	}
	busy := withRev(rs("busy", 1, 1, 0, 0), "1")
	r2, r3, r4 := withRev(rs("r2", 0, 0, 1, 0), "2"), withRev(rs("r3", 0, 0, 2, 0), "3"), withRev(rs("r4", 0, 0, 3, 0), "4")
	got := cleanupPlan(d, []*appsv1.ReplicaSet{r4, r3, busy, r2})
	if len(got) != 2 || got[0] != r2 || got[1] != r3 {
		t.Fatalf("plan %v, want r2, r3 (busy has pods, r4 is kept)", got)
	}
	d.Spec.RevisionHistoryLimit = nil
	if len(cleanupPlan(d, []*appsv1.ReplicaSet{r2, r3})) != 0 {
		t.Fatal("no limit, no cleanup")
	}
}

func TestRolloutStatusConditions(t *testing.T) {
	deadline := int32(60)
	d := rolling(2, pint(1), pint(0))
	d.Name, d.Generation = "web", 2
	d.Spec.ProgressDeadlineSeconds = &deadline
	newRS := rs("web-new", 2, 2, 0, 0)

	st := rolloutStatus([]*appsv1.ReplicaSet{newRS}, newRS, d, t0)
	if c := getCondition(st, appsv1.DeploymentProgressing); c == nil || c.Reason != ReasonNewRSAvailable {
		t.Fatalf("complete rollout: %+v", st.Conditions)
	}
	if c := getCondition(st, appsv1.DeploymentAvailable); c == nil || c.Status != corev1.ConditionTrue {
		t.Fatalf("available: %+v", st.Conditions)
	}
	if st.ObservedGeneration != 2 || st.UpdatedReplicas != 2 || st.AvailableReplicas != 2 || st.UnavailableReplicas != 0 {
		t.Fatalf("counts %+v", st)
	}

	// Mid-rollout, no progress since the condition's lastUpdateTime.
	old, stuck := rs("web-old", 2, 2, 0, 0), rs("web-new", 1, 0, 1, 0)
	d.Status = appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 1, AvailableReplicas: 2, ReadyReplicas: 2,
		Conditions: []appsv1.DeploymentCondition{newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonReplicaSetUpdated, "", t0)}}
	st = rolloutStatus([]*appsv1.ReplicaSet{old, stuck}, stuck, d, t0.Add(30*time.Second))
	if c := getCondition(st, appsv1.DeploymentProgressing); c.Reason != ReasonReplicaSetUpdated {
		t.Fatalf("within deadline: %+v", c)
	}
	if after, ok := stuckRequeueAfter(d, st, t0.Add(30*time.Second)); !ok || after != 31*time.Second {
		t.Fatalf("requeue after %v %v", after, ok)
	}
	st = rolloutStatus([]*appsv1.ReplicaSet{old, stuck}, stuck, d, t0.Add(61*time.Second))
	if c := getCondition(st, appsv1.DeploymentProgressing); c.Reason != ReasonTimedOut || c.Status != corev1.ConditionFalse {
		t.Fatalf("past deadline: %+v", c)
	}
	// Progress refreshes lastUpdateTime but keeps lastTransitionTime.
	stuck.Status.AvailableReplicas, stuck.Status.ReadyReplicas = 1, 1
	st = rolloutStatus([]*appsv1.ReplicaSet{old, stuck}, stuck, d, t0.Add(61*time.Second))
	if c := getCondition(st, appsv1.DeploymentProgressing); c.Reason != ReasonReplicaSetUpdated || !c.LastUpdateTime.Time.Equal(t0.Add(61*time.Second)) || !c.LastTransitionTime.Time.Equal(t0) {
		t.Fatalf("progress: %+v", c)
	}
	// Below minimum availability.
	old.Status.AvailableReplicas = 0
	stuck.Status.AvailableReplicas = 0
	st = rolloutStatus([]*appsv1.ReplicaSet{old, stuck}, stuck, d, t0)
	if c := getCondition(st, appsv1.DeploymentAvailable); c.Status != corev1.ConditionFalse || c.Reason != ReasonMinimumUnavailable {
		t.Fatalf("unavailable: %+v", c)
	}
}

func TestOldPodsRunning(t *testing.T) {
	newRS, old := rs("new", 1, 0, 1, 0), rs("old", 0, 0, 0, 0)
	old.Status.Replicas = 0
	pod := func(ph corev1.PodPhase) *corev1.Pod { return &corev1.Pod{Status: corev1.PodStatus{Phase: ph}} }
	tests := []struct {
		name string
		pods map[types.UID][]*corev1.Pod
		want bool
	}{
		{"none", map[types.UID][]*corev1.Pod{}, false},
		{"new pods only", map[types.UID][]*corev1.Pod{"new": {pod(corev1.PodRunning)}}, false},
		{"old running", map[types.UID][]*corev1.Pod{"old": {pod(corev1.PodRunning)}}, true},
		{"old pending", map[types.UID][]*corev1.Pod{"old": {pod(corev1.PodPending)}}, true},
		{"old unknown", map[types.UID][]*corev1.Pod{"old": {pod(corev1.PodUnknown)}}, true},
		{"old finished", map[types.UID][]*corev1.Pod{"old": {pod(corev1.PodSucceeded), pod(corev1.PodFailed)}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := oldPodsRunning(newRS, []*appsv1.ReplicaSet{old}, tt.pods); got != tt.want {
				t.Fatalf("got %v", got)
			}
		})
	}
	old.Status.Replicas = 1
	if !oldPodsRunning(newRS, []*appsv1.ReplicaSet{old}, nil) {
		t.Fatal("old status replicas count as running")
	}
}
