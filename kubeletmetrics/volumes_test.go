package kubeletmetrics

import (
	"strings"
	"testing"

	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Claim volumes are reported under upstream's names and labels, once per
// claim; a later measurement replaces the earlier one whole.
func TestVolumeStatsMetrics(t *testing.T) {
	m := newMetrics(t)
	n := func(v uint64) *uint64 { return &v }
	data := statsv1alpha1.VolumeStats{Name: "data", PVCRef: &statsv1alpha1.PVCReference{Namespace: "db", Name: "data-0"},
		FsStats: statsv1alpha1.FsStats{CapacityBytes: n(1000), AvailableBytes: n(600), UsedBytes: n(400),
			Inodes: n(50), InodesFree: n(40), InodesUsed: n(10)}}
	m.SetVolumeStats([]statsv1alpha1.VolumeStats{data, data})
	out := scrape(t, m)
	for _, want := range []string{
		`kubelet_volume_stats_capacity_bytes{namespace="db",persistentvolumeclaim="data-0"} 1000`,
		`kubelet_volume_stats_available_bytes{namespace="db",persistentvolumeclaim="data-0"} 600`,
		`kubelet_volume_stats_used_bytes{namespace="db",persistentvolumeclaim="data-0"} 400`,
		`kubelet_volume_stats_inodes{namespace="db",persistentvolumeclaim="data-0"} 50`,
		`kubelet_volume_stats_inodes_free{namespace="db",persistentvolumeclaim="data-0"} 40`,
		`kubelet_volume_stats_inodes_used{namespace="db",persistentvolumeclaim="data-0"} 10`,
	} {
		if strings.Count(out, want) != 1 {
			t.Errorf("want once: %s", want)
		}
	}
	m.SetVolumeStats(nil)
	if out := scrape(t, m); strings.Contains(out, "persistentvolumeclaim=") {
		t.Error("a claim gone from the measurement is still reported")
	}
	var nilMetrics *Metrics
	nilMetrics.SetVolumeStats(nil)
}
