package nodestatus

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAllocatable(t *testing.T) {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi"),
		corev1.ResourcePods: resource.MustParse("110"),
	}
	got := Allocatable(capacity,
		corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("2Gi")},
		corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}, nil)
	if got.Cpu().MilliValue() != 1250 || got.Memory().Value() != 0 || got.Pods().Value() != 110 {
		t.Fatalf("Allocatable = %v", got)
	}
	if capacity.Cpu().MilliValue() != 2000 {
		t.Fatal("Allocatable changed the capacity")
	}
}

func TestParsers(t *testing.T) {
	if v, err := parseMemTotal([]byte("MemTotal:       24594536 kB\nMemFree: 1 kB\n")); err != nil || v != 24594536*1024 {
		t.Fatalf("parseMemTotal = %d, %v", v, err)
	}
	if _, err := parseMemTotal([]byte("MemFree: 1 kB\n")); err == nil {
		t.Fatal("parseMemTotal without MemTotal succeeded")
	}
	for in, want := range map[string]string{
		"NAME=x\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n": "Debian GNU/Linux 12 (bookworm)",
		"PRETTY_NAME=Alpine\n": "Alpine",
		"NAME=x\n":             "",
	} {
		if got := parseOSRelease([]byte(in)); got != want {
			t.Errorf("parseOSRelease(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestReconcileExisting(t *testing.T) {
	initial := InitialNode("n1", Host{OperatingSystem: "linux", Architecture: "amd64"}, map[string]string{"extra": "1"}, "")
	existing := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"kubernetes.io/arch": "arm64", "mine": "x"}}}
	if !ReconcileExisting(existing, initial) {
		t.Fatal("no change reported")
	}
	want := map[string]string{"kubernetes.io/hostname": "n1", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64", "mine": "x"}
	if len(existing.Labels) != len(want) {
		t.Fatalf("labels = %v, want %v", existing.Labels, want)
	}
	for k, v := range want {
		if existing.Labels[k] != v {
			t.Fatalf("labels = %v, want %v", existing.Labels, want)
		}
	}
	if ReconcileExisting(existing, initial) {
		t.Fatal("second reconcile reported a change")
	}
}

func TestSetStatusTransitions(t *testing.T) {
	t1 := metav1.NewTime(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	t2 := metav1.NewTime(t1.Add(10 * time.Second))
	capacity := Capacity(Host{NumCPU: 2, MemoryBytes: 1 << 30}, 110)
	node := &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse, Reason: "RouteCreated"},
	}}}
	SetStatus(node, Observed{Capacity: capacity, Now: t1}, "n1")
	before := node.DeepCopy()
	SetStatus(node, Observed{Capacity: capacity, Now: t2}, "n1")
	if StatusChanged(&before.Status, &node.Status) {
		t.Fatal("a heartbeat alone counts as a change")
	}
	if len(node.Status.Conditions) != 5 || node.Status.Conditions[0].Reason != "RouteCreated" {
		t.Fatalf("conditions = %+v: foreign conditions must be kept", node.Status.Conditions)
	}
	SetStatus(node, Observed{Capacity: capacity, Now: t2, NotReady: errors.New("PLEG is not healthy"), Disk: true}, "n1")
	if !StatusChanged(&before.Status, &node.Status) {
		t.Fatal("a readiness change is not a change")
	}
	ready, disk := condition(node, corev1.NodeReady), condition(node, corev1.NodeDiskPressure)
	if ready.Status != corev1.ConditionFalse || ready.Message != "PLEG is not healthy" || !ready.LastTransitionTime.Equal(&t2) {
		t.Fatalf("Ready = %+v", ready)
	}
	if disk.Status != corev1.ConditionTrue || disk.Reason != "KubeletHasDiskPressure" || !disk.LastTransitionTime.Equal(&t2) {
		t.Fatalf("DiskPressure = %+v", disk)
	}
	if mem := condition(node, corev1.NodeMemoryPressure); !mem.LastTransitionTime.Equal(&t1) {
		t.Fatalf("MemoryPressure transition = %v, want %v", mem.LastTransitionTime, t1)
	}
	SetStatus(node, Observed{Capacity: corev1.ResourceList{}, Now: t2}, "n1")
	if r := condition(node, corev1.NodeReady); r.Status != corev1.ConditionFalse ||
		r.Message != "missing node capacity for resources: cpu, memory, pods" {
		t.Fatalf("Ready without capacity = %+v", r)
	}
}

// TestSetStatusVolumesInUse: the observed volumes in use replace the
// node's list; an unknown observation (an error) keeps it.
func TestSetStatusVolumesInUse(t *testing.T) {
	node := &corev1.Node{Status: corev1.NodeStatus{VolumesInUse: []corev1.UniqueVolumeName{"kubernetes.io/csi/d^old"}}}
	SetStatus(node, Observed{}, "n")
	if len(node.Status.VolumesInUse) != 1 {
		t.Errorf("unknown observation changed the list: %v", node.Status.VolumesInUse)
	}
	SetStatus(node, Observed{VolumesInUse: []corev1.UniqueVolumeName{"kubernetes.io/csi/d^a"}, VolumesInUseKnown: true}, "n")
	if got := node.Status.VolumesInUse; len(got) != 1 || got[0] != "kubernetes.io/csi/d^a" {
		t.Errorf("volumesInUse = %v", got)
	}
	SetStatus(node, Observed{VolumesInUseKnown: true}, "n")
	if len(node.Status.VolumesInUse) != 0 {
		t.Errorf("volumesInUse after the last unmount = %v", node.Status.VolumesInUse)
	}
}
