package kubeletmetrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// volumeStats is upstream's kubelet_volume_stats_* family: the usage of
// every volume that belongs to a PersistentVolumeClaim, by namespace and
// claim, as last measured. It is a collector of its own (not gauge
// vectors) so that a scrape sees one measurement whole and claims gone
// since drop out.
type volumeStats struct {
	mu     sync.Mutex
	claims []statsv1alpha1.VolumeStats
}

var volumeStatLabels = []string{"namespace", "persistentvolumeclaim"}

// volumeStatDescs pairs each metric with the field it reports.
var volumeStatDescs = []struct {
	desc  *prometheus.Desc
	value func(statsv1alpha1.FsStats) *uint64
}{
	{prometheus.NewDesc("kubelet_volume_stats_capacity_bytes", "Capacity in bytes of the volume", volumeStatLabels, nil),
		func(s statsv1alpha1.FsStats) *uint64 { return s.CapacityBytes }},
	{prometheus.NewDesc("kubelet_volume_stats_available_bytes", "Number of available bytes in the volume", volumeStatLabels, nil),
		func(s statsv1alpha1.FsStats) *uint64 { return s.AvailableBytes }},
	{prometheus.NewDesc("kubelet_volume_stats_used_bytes", "Number of used bytes in the volume", volumeStatLabels, nil),
		func(s statsv1alpha1.FsStats) *uint64 { return s.UsedBytes }},
	{prometheus.NewDesc("kubelet_volume_stats_inodes", "Maximum number of inodes in the volume", volumeStatLabels, nil),
		func(s statsv1alpha1.FsStats) *uint64 { return s.Inodes }},
	{prometheus.NewDesc("kubelet_volume_stats_inodes_free", "Number of free inodes in the volume", volumeStatLabels, nil),
		func(s statsv1alpha1.FsStats) *uint64 { return s.InodesFree }},
	{prometheus.NewDesc("kubelet_volume_stats_inodes_used", "Number of used inodes in the volume", volumeStatLabels, nil),
		func(s statsv1alpha1.FsStats) *uint64 { return s.InodesUsed }},
}

func (v *volumeStats) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range volumeStatDescs {
		ch <- d.desc
	}
}

// Collect reports each claim once: two pods mounting one claim report
// the same volume.
func (v *volumeStats) Collect(ch chan<- prometheus.Metric) {
	v.mu.Lock()
	claims := v.claims
	v.mu.Unlock()
	seen := map[statsv1alpha1.PVCReference]bool{}
	for _, c := range claims {
		if c.PVCRef == nil || seen[*c.PVCRef] {
			continue
		}
		seen[*c.PVCRef] = true
		for _, d := range volumeStatDescs {
			if p := d.value(c.FsStats); p != nil {
				ch <- prometheus.MustNewConstMetric(d.desc, prometheus.GaugeValue, float64(*p), c.PVCRef.Namespace, c.PVCRef.Name)
			}
		}
	}
}

// SetVolumeStats replaces the claim volumes reported (stats.VolumeMetrics).
func (m *Metrics) SetVolumeStats(claimVolumes []statsv1alpha1.VolumeStats) {
	if m == nil {
		return
	}
	m.volumes.mu.Lock()
	defer m.volumes.mu.Unlock()
	m.volumes.claims = claimVolumes
}
