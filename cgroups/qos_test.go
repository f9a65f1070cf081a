package cgroups

import (
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestOOMScoreAdj(t *testing.T) {
	const capacity = 8 << 30
	g := mkPod("g", []corev1.Container{ctr(t, "a", "cpu=1,memory=1Gi", "cpu=1,memory=1Gi")})
	be := mkPod("be", []corev1.Container{ctr(t, "a", "", "")})
	b := mkPod("b", []corev1.Container{
		ctr(t, "none", "cpu=100m", ""),
		ctr(t, "half", "memory=4Gi", ""),
		ctr(t, "all", "memory=8Gi", ""),
		ctr(t, "more", "memory=16Gi", ""),
		ctr(t, "tiny", "memory=1Mi", ""),
	})
	side := mkPod("s",
		[]corev1.Container{ctr(t, "app", "memory=4Gi", ""), ctr(t, "app2", "memory=6Gi", "")},
		sidecar(t, "small", "memory=1Gi", ""), sidecar(t, "big", "memory=7Gi", ""))
	critical := mkPod("crit", []corev1.Container{ctr(t, "a", "memory=1Gi", "")})
	critical.Spec.PriorityClassName = "system-node-critical"
	prio := int32(2000001000)
	critical.Spec.Priority = &prio
	notCritical := critical.DeepCopy()
	notCritical.Spec.Priority = nil
	static := notCritical.DeepCopy()
	static.Annotations = map[string]string{"kubernetes.io/config.source": "file"}

	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		c    *corev1.Container
		want int
	}{
		{"guaranteed", g, &g.Spec.Containers[0], -997},
		{"besteffort", be, &be.Spec.Containers[0], 1000},
		{"burstable without memory request", b, &b.Spec.Containers[0], 999},
		{"burstable half the memory", b, &b.Spec.Containers[1], 500},
		{"burstable all the memory", b, &b.Spec.Containers[2], 3},
		{"burstable more than the memory", b, &b.Spec.Containers[3], 3},
		{"burstable tiny request", b, &b.Spec.Containers[4], 999},
		{"sidecar capped by smallest app container", side, &side.Spec.InitContainers[0], 500},
		{"sidecar with more memory keeps its own", side, &side.Spec.InitContainers[1], 125},
		{"node critical", critical, &critical.Spec.Containers[0], -997},
		{"critical class without critical priority", notCritical, &notCritical.Spec.Containers[0], 875},
		{"static node critical", static, &static.Spec.Containers[0], -997},
	} {
		if got := OOMScoreAdj(tc.pod, tc.c, capacity); got != tc.want {
			t.Errorf("%s: OOMScoreAdj = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestClampOOMScoreAdj(t *testing.T) {
	for _, tc := range []struct {
		adj, floor, want int
	}{
		{-997, 0, 0}, {-997, -1000, -997}, {500, 0, 500}, {500, 600, 600},
		{1000, 0, 1000}, {2000, 0, 1000}, {-2000, -2000, -1000}, {-998, -500, -500},
	} {
		if got := ClampOOMScoreAdj(tc.adj, tc.floor); got != tc.want {
			t.Errorf("ClampOOMScoreAdj(%d, %d) = %d, want %d", tc.adj, tc.floor, got, tc.want)
		}
	}
}

func TestReadOOMScoreAdj(t *testing.T) {
	f := filepath.Join(t.TempDir(), "oom_score_adj")
	if err := os.WriteFile(f, []byte("-500\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := readOOMScoreAdj(f); err != nil || got != -500 {
		t.Errorf("readOOMScoreAdj = %d, %v; want -500", got, err)
	}
	if _, err := OwnOOMScoreAdj(); err != nil {
		t.Errorf("OwnOOMScoreAdj: %v", err)
	}
}

func TestSetOwnOOMScoreAdj(t *testing.T) {
	for _, v := range []int{-1001, 1001} {
		if err := SetOwnOOMScoreAdj(v); err == nil {
			t.Errorf("SetOwnOOMScoreAdj(%d) accepted", v)
		}
	}
	own, err := OwnOOMScoreAdj()
	if err != nil {
		t.Fatal(err)
	}
	// Writing the score it has is always permitted (lowering may not be).
	if err := SetOwnOOMScoreAdj(own); err != nil {
		t.Fatalf("SetOwnOOMScoreAdj(%d), the current score: %v", own, err)
	}
	if got, _ := OwnOOMScoreAdj(); got != own {
		t.Fatalf("score %d after writing %d", got, own)
	}
}
