package volumes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
)

// stats asks the CSI driver of the volume at dir (as its vol_data.json
// records it) for the volume's usage, when the driver has
// GET_VOLUME_STATS; ok is false when there is nothing to report.
func (p *csiPlugin) stats(ctx context.Context, _ *corev1.Pod, _ *corev1.Volume, dir string) (VolumeStats, bool, error) {
	var data csiVolumeData
	if err := readJSON(filepath.Join(dir, csiVolData), &data); errors.Is(err, os.ErrNotExist) {
		return VolumeStats{}, false, nil
	} else if err != nil {
		return VolumeStats{}, false, err
	}
	if p.drivers == nil {
		return VolumeStats{}, false, nil
	}
	client, err := p.drivers.NodeClient(data.DriverName)
	if err != nil {
		return VolumeStats{}, false, err
	}
	caps, err := nodeCapabilities(ctx, client)
	if err != nil {
		return VolumeStats{}, false, fmt.Errorf("NodeGetCapabilities of CSI driver %s: %w", data.DriverName, err)
	}
	if !caps[csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS] {
		return VolumeStats{}, false, nil
	}
	req := &csipb.NodeGetVolumeStatsRequest{VolumeId: data.VolumeHandle, VolumePath: filepath.Join(dir, csiMountDir)}
	if data.VolumeLifecycleMode != csiModeEphemeral && caps[csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME] {
		req.StagingTargetPath = filepath.Join(CSIStagingDir(p.root, data.DriverName, data.VolumeHandle), csiGlobalMount)
	}
	resp, err := client.NodeGetVolumeStats(ctx, req)
	if err != nil {
		return VolumeStats{}, false, fmt.Errorf("NodeGetVolumeStats of volume %s (CSI driver %s): %w", data.VolumeHandle, data.DriverName, err)
	}
	return csiUsage(resp.GetUsage()), true, nil
}

// csiUsage converts the driver's usage entries.
func csiUsage(usage []*csipb.VolumeUsage) VolumeStats {
	var st VolumeStats
	for _, u := range usage {
		switch u.GetUnit() {
		case csipb.VolumeUsage_BYTES:
			st.CapacityBytes, st.AvailableBytes, st.UsedBytes = u.GetTotal(), u.GetAvailable(), u.GetUsed()
		case csipb.VolumeUsage_INODES:
			st.Inodes, st.InodesFree, st.InodesUsed = u.GetTotal(), u.GetAvailable(), u.GetUsed()
		}
	}
	return st
}
