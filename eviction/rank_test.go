package eviction

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func pod(name string, requests, limits corev1.ResourceList, prio int32) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{Priority: &prio, Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits}}}},
	}
}

func mem(s string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(s), corev1.ResourceCPU: resource.MustParse("100m")}
}

func names(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

// rank sorts as Victim does and returns the order.
func rank(res corev1.ResourceName, pods []*corev1.Pod, stats map[types.UID]PodStats) string {
	sorted := append([]*corev1.Pod(nil), pods...)
	for i := range sorted { // insertion sort keeps the test independent of slices.SortStableFunc
		for j := i; j > 0 && rankFunc(res, stats)(sorted[j], sorted[j-1]) < 0; j-- {
			sorted[j], sorted[j-1] = sorted[j-1], sorted[j]
		}
	}
	return strings.Join(names(sorted), ",")
}

// Upstream's memory ranking makes BestEffort go first, then Burstable
// above its requests, Guaranteed last, even when the Guaranteed pod uses
// the most memory.
func TestRankMemoryQoS(t *testing.T) {
	guaranteed := pod("guaranteed", mem("512Mi"), mem("512Mi"), 0)
	burstable := pod("burstable", mem("100Mi"), nil, 0)
	besteffort := pod("besteffort", nil, nil, 0)
	stats := map[types.UID]PodStats{
		guaranteed.UID: {Memory: 500 * mi},
		burstable.UID:  {Memory: 150 * mi},
		besteffort.UID: {Memory: 20 * mi},
	}
	pods := []*corev1.Pod{guaranteed, burstable, besteffort}
	// besteffort and burstable exceed their requests; besteffort by 20Mi,
	// burstable by 50Mi: the larger excess goes first among them.
	if got := rank(corev1.ResourceMemory, pods, stats); got != "burstable,besteffort,guaranteed" {
		t.Errorf("rank = %s", got)
	}
	stats[burstable.UID] = PodStats{Memory: 90 * mi} // within its request now
	if got := rank(corev1.ResourceMemory, pods, stats); got != "besteffort,burstable,guaranteed" {
		t.Errorf("rank = %s (within requests: by usage above request, -10Mi before -12Mi)", got)
	}
	e, ok := Victim(Threshold{Signal: MemoryAvailable, Value: Value{Quantity: 100 * mi}}, nil, memObs(12*mi), pods, stats, 30)
	if !ok || e.Pod != besteffort || e.GracePeriod != 0 {
		t.Errorf("Victim = %s grace %d, want besteffort, 0 (hard)", e.Pod.Name, e.GracePeriod)
	}
}

func TestRankPriorityAndMissingStats(t *testing.T) {
	low := pod("low", nil, nil, -10)
	high := pod("high", nil, nil, 1000)
	nostats := pod("nostats", mem("1Gi"), mem("1Gi"), 5000)
	stats := map[types.UID]PodStats{low.UID: {Memory: 1 * mi}, high.UID: {Memory: 900 * mi}}
	if got := rank(corev1.ResourceMemory, []*corev1.Pod{high, nostats, low}, stats); got != "nostats,low,high" {
		t.Errorf("rank = %s: upstream ranks unmeasured pods first, then lower priority", got)
	}
}

func TestRankPIDs(t *testing.T) {
	a := pod("a", mem("1Gi"), mem("1Gi"), 0)
	b := pod("b", nil, nil, 0)
	c := pod("c", nil, nil, 100)
	stats := map[types.UID]PodStats{a.UID: {Processes: 500}, b.UID: {Processes: 3}, c.UID: {Processes: 9000}}
	if got := rank(resourcePIDs, []*corev1.Pod{b, c, a}, stats); got != "a,b,c" {
		t.Errorf("rank = %s: priority, then process count (no requests)", got)
	}
}

func TestRankDisk(t *testing.T) {
	storage := func(s string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse(s)}
	}
	within := pod("within", storage("1Gi"), nil, 0)
	over := pod("over", storage("10Mi"), nil, 0)
	none := pod("none", nil, nil, 0)
	stats := map[types.UID]PodStats{within.UID: {Disk: 500 * mi}, over.UID: {Disk: 20 * mi}, none.UID: {Disk: 5 * mi}}
	if got := rank(corev1.ResourceEphemeralStorage, []*corev1.Pod{within, none, over}, stats); got != "over,none,within" {
		t.Errorf("rank = %s", got)
	}
}

func TestVictimSkipsCriticalPods(t *testing.T) {
	static := pod("static", nil, nil, 0)
	static.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
	mirror := pod("mirror", nil, nil, 0)
	mirror.Annotations = map[string]string{"kubernetes.io/config.mirror": "abc"}
	system := pod("system", nil, nil, 2000001000) // system-node-critical
	th := Threshold{Signal: MemoryAvailable, Value: Value{Quantity: 100 * mi}}
	stats := map[types.UID]PodStats{}
	if e, ok := Victim(th, nil, memObs(1), []*corev1.Pod{static, mirror, system}, stats, 0); ok {
		t.Errorf("critical pod %s evicted", e.Pod.Name)
	}
	user := pod("user", mem("1Gi"), mem("1Gi"), 0)
	if e, ok := Victim(th, nil, memObs(1), []*corev1.Pod{static, mirror, system, user}, stats, 0); !ok || e.Pod != user {
		t.Errorf("Victim = %v, %v, want the Guaranteed user pod", e.Pod, ok)
	}
	api := pod("api", nil, nil, 0)
	api.Annotations = map[string]string{"kubernetes.io/config.source": "api"}
	if IsCriticalPod(api) || !IsCriticalPod(static) || !IsCriticalPod(mirror) || !IsCriticalPod(system) {
		t.Error("IsCriticalPod")
	}
}

func TestVictimSoftGraceAndMessage(t *testing.T) {
	p := pod("p", nil, nil, 0)
	soft := Threshold{Signal: MemoryAvailable, Value: Value{Quantity: 100 * mi}, GracePeriod: 60e9}
	e, _ := Victim(soft, []Threshold{soft}, memObs(12*mi), []*corev1.Pod{p}, nil, 45)
	if e.GracePeriod != 45 {
		t.Errorf("soft, pod without its own: grace %d, want --eviction-max-pod-grace-period 45", e.GracePeriod)
	}
	ten := int64(10)
	p.Spec.TerminationGracePeriodSeconds = &ten
	if e, _ = Victim(soft, []Threshold{soft}, memObs(12*mi), []*corev1.Pod{p}, nil, 45); e.GracePeriod != 10 {
		t.Errorf("soft: grace %d, want the pod's shorter 10", e.GracePeriod)
	}
	want := "The node was low on resource: memory. Threshold quantity: 100Mi, available: 12Mi. "
	if e.Message != want {
		t.Errorf("message %q, want %q", e.Message, want)
	}
	disk := Threshold{Signal: NodeFSAvailable, Value: Value{Percentage: 0.1}}
	obs := Observations{NodeFSAvailable: {Available: 5 << 30, Capacity: 100 << 30}}
	e, _ = Victim(disk, []Threshold{disk}, obs, []*corev1.Pod{p}, nil, 0)
	if want := "The node was low on resource: ephemeral-storage. Threshold quantity: 10Gi, available: 5Gi. "; e.Message != want {
		t.Errorf("message %q, want %q", e.Message, want)
	}
	st := e.Status(corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady}}}, metav1.Now())
	if st.Phase != corev1.PodFailed || st.Reason != "Evicted" || st.Message != e.Message || len(st.Conditions) != 2 ||
		st.Conditions[1].Type != corev1.DisruptionTarget || st.Conditions[1].Reason != "TerminationByKubelet" {
		t.Errorf("status = %+v", st)
	}
}
