package stats

// The pods' volumes: measured apart from the containers' samples and less
// often (a measurement walks whole directory trees), as upstream's
// kubelet does with its volume stats calculators.

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// DefaultVolumeInterval is how often volumes are measured unless
// configured: upstream's --volume-stats-agg-period.
const DefaultVolumeInterval = time.Minute

// Volumes measures the volumes of the node's pods, as the Summary API's
// pod volume entries keyed by pod UID. *volumes.Manager satisfies it. An
// error comes with what could be measured.
type Volumes interface {
	VolumeStats(ctx context.Context) (map[types.UID][]statsv1alpha1.VolumeStats, error)
}

// VolumeMetrics receives every measurement of the volumes that belong to
// a claim (kubelet_volume_stats_*); *kubeletmetrics.Metrics satisfies it.
type VolumeMetrics interface {
	SetVolumeStats(claimVolumes []statsv1alpha1.VolumeStats)
}

// runVolumes measures the volumes at once and then every VolumeInterval
// until ctx ends.
func (c *Collector) runVolumes(ctx context.Context) {
	ticker := time.NewTicker(c.cfg.VolumeInterval)
	defer ticker.Stop()
	for {
		c.measureVolumes(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// measureVolumes takes one measurement, bounded by the interval, and
// publishes it; what failed is logged and left out.
func (c *Collector) measureVolumes(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.VolumeInterval)
	defer cancel()
	vols, err := c.cfg.Volumes.VolumeStats(ctx)
	if err != nil && ctx.Err() == nil {
		c.cfg.Log.Warn("stats: measure volumes", "err", err)
	}
	c.volumes.Store(&vols)
	if c.cfg.VolumeMetrics == nil {
		return
	}
	var claims []statsv1alpha1.VolumeStats
	for _, list := range vols {
		for _, v := range list {
			if v.PVCRef != nil {
				claims = append(claims, v)
			}
		}
	}
	c.cfg.VolumeMetrics.SetVolumeStats(claims)
}

// podVolumes is the last measurement (nil before the first).
func (c *Collector) podVolumes() map[types.UID][]statsv1alpha1.VolumeStats {
	if p := c.volumes.Load(); p != nil {
		return *p
	}
	return nil
}
