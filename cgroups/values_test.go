package cgroups

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestMilliCPUToShares(t *testing.T) {
	for _, tc := range []struct {
		milli int64
		want  uint64
	}{
		{0, 2}, {1, 2}, {2, 2}, {10, 10}, {250, 256}, {500, 512}, {1000, 1024},
		{256000, 262144}, {300000, 262144},
	} {
		if got := MilliCPUToShares(tc.milli); got != tc.want {
			t.Errorf("MilliCPUToShares(%d) = %d, want %d", tc.milli, got, tc.want)
		}
	}
}

func TestSharesToWeight(t *testing.T) {
	for _, tc := range []struct {
		shares, want uint64
	}{
		{0, 0}, {1, 1}, {2, 1}, {512, 20}, {1024, 39}, {2048, 79},
		{262144, 10000}, {500000, 10000},
	} {
		if got := SharesToWeight(tc.shares); got != tc.want {
			t.Errorf("SharesToWeight(%d) = %d, want %d", tc.shares, got, tc.want)
		}
	}
}

func TestMilliCPUToQuota(t *testing.T) {
	for _, tc := range []struct {
		milli, period, want int64
	}{
		{0, 100000, 0}, {1, 100000, 1000}, {10, 100000, 1000}, {11, 100000, 1100},
		{500, 100000, 50000}, {2500, 100000, 250000}, {500, 50000, 25000},
	} {
		if got := MilliCPUToQuota(tc.milli, tc.period); got != tc.want {
			t.Errorf("MilliCPUToQuota(%d, %d) = %d, want %d", tc.milli, tc.period, got, tc.want)
		}
	}
}

func TestPodResources(t *testing.T) {
	overhead := mkPod("o", []corev1.Container{ctr(t, "a", "cpu=500m,memory=128Mi", "cpu=500m,memory=128Mi")})
	overhead.Spec.Overhead = rl(t, "cpu=100m,memory=10Mi")
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		pids int64
		want string
	}{
		{"guaranteed", mkPod("g", []corev1.Container{ctr(t, "a", "cpu=500m,memory=128Mi", "cpu=500m,memory=128Mi")}), 100,
			"shares=512 quota=50000 period=100000 mem=134217728 pids=100"},
		{"guaranteed two containers", mkPod("g2", []corev1.Container{
			ctr(t, "a", "cpu=250m,memory=64Mi", "cpu=250m,memory=64Mi"),
			ctr(t, "b", "cpu=250m,memory=64Mi", "cpu=250m,memory=64Mi")}), 0,
			"shares=512 quota=50000 period=100000 mem=134217728 pids=-"},
		{"burstable cpu limits only", mkPod("b1", []corev1.Container{ctr(t, "a", "cpu=250m,memory=64Mi", "cpu=1")}), 0,
			"shares=256 quota=100000 period=100000 mem=- pids=-"},
		{"burstable memory limits only", mkPod("b2", []corev1.Container{ctr(t, "a", "cpu=250m", "memory=64Mi")}), 0,
			"shares=256 quota=- period=- mem=67108864 pids=-"},
		{"burstable one container without limits", mkPod("b3", []corev1.Container{
			ctr(t, "a", "cpu=100m,memory=64Mi", "cpu=200m,memory=128Mi"),
			ctr(t, "b", "cpu=100m", "")}), 0,
			"shares=204 quota=- period=- mem=- pids=-"},
		{"burstable init container limit missing", mkPod("b4",
			[]corev1.Container{ctr(t, "a", "cpu=100m", "cpu=200m,memory=128Mi")},
			ctr(t, "init", "cpu=100m", "")), 0,
			"shares=102 quota=- period=- mem=- pids=-"},
		{"init container larger than apps", mkPod("b5",
			[]corev1.Container{ctr(t, "a", "cpu=100m", "")},
			ctr(t, "init", "cpu=2", "")), 0,
			"shares=2048 quota=- period=- mem=- pids=-"},
		{"sidecar adds to apps", mkPod("b6",
			[]corev1.Container{ctr(t, "a", "cpu=200m", "")},
			sidecar(t, "side", "cpu=100m", "")), 0,
			"shares=307 quota=- period=- mem=- pids=-"},
		{"init after sidecar needs both", mkPod("b7",
			[]corev1.Container{ctr(t, "a", "cpu=100m", "")},
			sidecar(t, "side", "cpu=300m", ""), ctr(t, "init", "cpu=500m", "")), 0,
			"shares=819 quota=- period=- mem=- pids=-"},
		{"overhead", overhead, 0,
			"shares=614 quota=60000 period=100000 mem=144703488 pids=-"},
		{"tiny cpu", mkPod("t", []corev1.Container{ctr(t, "a", "cpu=1m,memory=4Mi", "cpu=1m,memory=4Mi")}), 0,
			"shares=2 quota=1000 period=100000 mem=4194304 pids=-"},
		{"besteffort", mkPod("be", []corev1.Container{ctr(t, "a", "", "")}), 50,
			"shares=2 quota=- period=- mem=- pids=50"},
		{"besteffort ignores pids <= 0", mkPod("be2", []corev1.Container{ctr(t, "a", "", "")}), -1,
			"shares=2 quota=- period=- mem=- pids=-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fmtRes(PodResources(tc.pod, tc.pids)); got != tc.want {
				t.Errorf("PodResources = %s\n                  want %s", got, tc.want)
			}
		})
	}
}

func TestTierResources(t *testing.T) {
	g := mkPod("g", []corev1.Container{ctr(t, "a", "cpu=1,memory=1Gi", "cpu=1,memory=1Gi")})
	b1 := mkPod("b1", []corev1.Container{ctr(t, "a", "cpu=250m", "")})
	b2 := mkPod("b2", []corev1.Container{ctr(t, "a", "cpu=500m", "cpu=1")})
	b3 := mkPod("b3", []corev1.Container{ctr(t, "a", "memory=1Gi", "")})
	be := mkPod("be", []corev1.Container{ctr(t, "a", "", "")})
	for _, tc := range []struct {
		name          string
		pods          []*corev1.Pod
		burst, beffrt string
	}{
		{"none", nil, "shares=2 quota=- period=- mem=- pids=-", "shares=2 quota=- period=- mem=- pids=-"},
		{"only guaranteed and besteffort", []*corev1.Pod{g, be},
			"shares=2 quota=- period=- mem=- pids=-", "shares=2 quota=- period=- mem=- pids=-"},
		{"burstable sum", []*corev1.Pod{g, b1, b2, b3, be},
			"shares=768 quota=- period=- mem=- pids=-", "shares=2 quota=- period=- mem=- pids=-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, e := TierResources(tc.pods)
			if got := fmtRes(b); got != tc.burst {
				t.Errorf("burstable = %s, want %s", got, tc.burst)
			}
			if got := fmtRes(e); got != tc.beffrt {
				t.Errorf("besteffort = %s, want %s", got, tc.beffrt)
			}
		})
	}
}

func TestKubepodsResources(t *testing.T) {
	for _, tc := range []struct {
		alloc, want string
	}{
		{"", "shares=- quota=- period=- mem=- pids=-"},
		{"cpu=2,memory=4Gi,pid=1000", "shares=2048 quota=- period=- mem=4294967296 pids=1000"},
		{"cpu=1500m", "shares=1536 quota=- period=- mem=- pids=-"},
	} {
		if got := fmtRes(KubepodsResources(rl(t, tc.alloc))); got != tc.want {
			t.Errorf("KubepodsResources(%q) = %s, want %s", tc.alloc, got, tc.want)
		}
	}
}

func TestContainerResources(t *testing.T) {
	const capacity = 8 << 30
	g := mkPod("g", []corev1.Container{ctr(t, "a", "cpu=500m,memory=1Gi", "cpu=500m,memory=1Gi")})
	b := mkPod("b", []corev1.Container{
		ctr(t, "req", "cpu=250m,memory=2Gi", ""),
		ctr(t, "lim", "", "cpu=2,memory=512Mi"),
	})
	be := mkPod("be", []corev1.Container{ctr(t, "a", "", "")})
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		c    *corev1.Container
		want ContainerValues
	}{
		{"guaranteed", g, &g.Spec.Containers[0],
			ContainerValues{CPUShares: 512, CPUQuota: 50000, CPUPeriod: 100000, MemoryLimit: 1 << 30, OOMScoreAdj: -997}},
		{"request only", b, &b.Spec.Containers[0],
			ContainerValues{CPUShares: 256, CPUQuota: 0, CPUPeriod: 100000, MemoryLimit: 0, OOMScoreAdj: 750}},
		{"limit only: shares from the limit", b, &b.Spec.Containers[1],
			ContainerValues{CPUShares: 2048, CPUQuota: 200000, CPUPeriod: 100000, MemoryLimit: 512 << 20, OOMScoreAdj: 999}},
		{"besteffort", be, &be.Spec.Containers[0],
			ContainerValues{CPUShares: 2, CPUQuota: 0, CPUPeriod: 100000, MemoryLimit: 0, OOMScoreAdj: 1000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ContainerResources(tc.pod, tc.c, capacity); got != tc.want {
				t.Errorf("ContainerResources = %+v, want %+v", got, tc.want)
			}
		})
	}
}
