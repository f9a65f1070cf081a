package nodelet

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/gc"

	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/containerd"
)

// The image GC runs every 30th housekeeping tick (every 5 minutes), the
// container GC every 6th (once a minute): upstream's periods.
const (
	imageGCTicks     = 30
	containerGCTicks = 6
)

// imageFSPath is what the image GC measures: containerd's snapshotter
// (or content) root when containerd tells it, else the nodelet's root
// directory (usually on the same filesystem as /var/lib/containerd).
func (a *Agent) imageFSPath(ctx context.Context, rt *containerd.Runtime) string {
	root, err := rt.ImageFSRoot(ctx)
	if err == nil && root != "" {
		if _, err = gc.StatfsUsage(root); err == nil {
			return root
		}
	}
	a.log.Info("image gc measures the nodelet's root dir", "path", a.cfg.RootDir, "containerdRoot", root, "err", err)
	return a.cfg.RootDir
}

// imageGC builds the agent's image collector on the runtime.
func (a *Agent) imageGC(ctx context.Context, w *wired) *gc.Images {
	path := a.imageFSPath(ctx, w.rt)
	pause, _ := runtime.NormalizeImageRef(a.cfg.PodInfraImage)
	return &gc.Images{
		Policy: runtime.ImageGCPolicy{
			HighThresholdPercent: a.cfg.ImageGCHighThresholdPercent,
			LowThresholdPercent:  a.cfg.ImageGCLowThresholdPercent,
			MinAge:               a.cfg.ImageMinimumGCAge,
		},
		Usage: func(context.Context) (runtime.FSUsage, error) { return gc.StatfsUsage(path) },
		List:  w.rt.ListImages, InUse: w.rt.ImagesInUse, Remove: w.rt.RemoveImage,
		Pinned:  func(name string) bool { return name == pause || name == a.cfg.PodInfraImage },
		Removed: a.metrics.ImageGCRemoved,
		Now:     time.Now, Log: a.log.With("component", "imagegc"),
	}
}

// containerGC builds the agent's collector on the runtime, the informer's
// pods and the workers.
func (a *Agent) containerGC(w *wired) *gc.Containers {
	return &gc.Containers{
		Policy: runtime.GCPolicy{
			MinAge:             a.cfg.MinimumContainerTTLDuration,
			MaxPerPodContainer: a.cfg.MaximumDeadContainersPerContainer,
			MaxContainers:      a.cfg.MaximumDeadContainers,
		},
		List: w.rt.PodStatuses, RemoveContainer: w.rt.RemoveContainer, RemoveSandbox: w.rt.RemoveSandbox,
		IsPodLive: func(uid types.UID) bool {
			return podByUID(w, uid) != nil || !w.board.Lifecycle().ContentRemovable(uid)
		},
		Removed: a.metrics.ContainerGCRemoved,
		Now:     time.Now, Log: a.log.With("component", "containergc"),
	}
}
