package nodelet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/containerd"
)

// imageGCTicks: the image GC runs every 30th housekeeping tick (every 5
// minutes, upstream's period).
const imageGCTicks = 30

// imageGC removes unused images when the image filesystem fills up:
// runtime.PlanImageGC decides from a fresh listing, collect removes. It
// remembers in memory when it first saw each image (at the nodelet's
// start for those already there) and when a container last used it.
type imageGC struct {
	policy runtime.ImageGCPolicy
	// usage measures the image filesystem.
	usage  func(ctx context.Context) (runtime.FSUsage, error)
	list   func(ctx context.Context) ([]runtime.StoredImage, error)
	inUse  func(ctx context.Context) (map[string]bool, error)
	remove func(ctx context.Context, img runtime.StoredImage) error
	// pinned tells whether a name is one of a never removed image (the
	// sandbox image).
	pinned func(name string) bool
	// removed, optional, counts each removed image by reason ("space":
	// the only one, there is no maximum age;
	// kubelet_image_garbage_collected_total).
	removed func(reason string)
	now     func() time.Time
	log     *slog.Logger

	firstSeen, lastUsed map[string]time.Time // by image ID
}

// collect runs one image garbage collection; every removal is tried and
// the errors are joined.
func (g *imageGC) collect(ctx context.Context) error {
	records, err := g.detect(ctx)
	if err != nil {
		return fmt.Errorf("image gc: %w", err)
	}
	usage, err := g.usage(ctx)
	if err != nil {
		return fmt.Errorf("image gc: %w", err)
	}
	var errs []error
	for _, r := range runtime.PlanImageGC(g.policy, usage, records, g.now()) {
		img := runtime.StoredImage{ID: r.ID, Records: r.Refs, Size: r.Size}
		if err := g.remove(ctx, img); err != nil {
			errs = append(errs, fmt.Errorf("image gc: remove image %s %v: %w", r.ID, r.Refs, err))
			continue
		}
		delete(g.firstSeen, r.ID)
		delete(g.lastUsed, r.ID)
		if g.removed != nil {
			g.removed("space")
		}
		g.log.Info("removed unused image", "image", r.ID, "names", r.Refs, "size", r.Size, "lastUsed", r.LastUsed)
	}
	return errors.Join(errs...)
}

// detect lists the images, updates first seen and last used and returns
// the plan's records.
func (g *imageGC) detect(ctx context.Context) ([]runtime.ImageRecord, error) {
	imgs, err := g.list(ctx)
	if err != nil {
		return nil, err
	}
	used, err := g.inUse(ctx)
	if err != nil {
		return nil, err
	}
	now := g.now()
	present := map[string]bool{}
	records := make([]runtime.ImageRecord, 0, len(imgs))
	for _, img := range imgs {
		present[img.ID] = true
		if _, ok := g.firstSeen[img.ID]; !ok {
			g.firstSeen[img.ID] = now
		}
		r := runtime.ImageRecord{ID: img.ID, Refs: img.Records, Size: img.Size, FirstSeen: g.firstSeen[img.ID],
			InUse:  slices.ContainsFunc(img.Records, func(n string) bool { return used[n] }),
			Pinned: slices.ContainsFunc(img.Names(), g.pinned)}
		if r.InUse {
			g.lastUsed[img.ID] = now
		}
		r.LastUsed = g.lastUsed[img.ID]
		records = append(records, r)
	}
	for id := range g.firstSeen {
		if !present[id] {
			delete(g.firstSeen, id)
			delete(g.lastUsed, id)
		}
	}
	return records, nil
}

// statfsUsage measures the filesystem holding path.
func statfsUsage(path string) (runtime.FSUsage, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return runtime.FSUsage{}, fmt.Errorf("statfs image filesystem %s: %w", path, err)
	}
	return runtime.FSUsage{Capacity: int64(st.Blocks) * st.Bsize, Available: int64(st.Bavail) * st.Bsize}, nil
}

// imageFSPath is what the image GC measures: containerd's snapshotter
// (or content) root when containerd tells it, else the nodelet's root
// directory (usually on the same filesystem as /var/lib/containerd).
func (a *Agent) imageFSPath(ctx context.Context, rt *containerd.Runtime) string {
	root, err := rt.ImageFSRoot(ctx)
	if err == nil && root != "" {
		if _, err = statfsUsage(root); err == nil {
			return root
		}
	}
	a.log.Info("image gc measures the nodelet's root dir", "path", a.cfg.RootDir, "containerdRoot", root, "err", err)
	return a.cfg.RootDir
}

// imageGC builds the agent's image collector on the runtime.
func (a *Agent) imageGC(ctx context.Context, w *wired) *imageGC {
	path := a.imageFSPath(ctx, w.rt)
	pause, _ := runtime.NormalizeImageRef(a.cfg.PodInfraImage)
	return &imageGC{
		policy: runtime.ImageGCPolicy{
			HighThresholdPercent: a.cfg.ImageGCHighThresholdPercent,
			LowThresholdPercent:  a.cfg.ImageGCLowThresholdPercent,
			MinAge:               a.cfg.ImageMinimumGCAge,
		},
		usage: func(context.Context) (runtime.FSUsage, error) { return statfsUsage(path) },
		list:  w.rt.ListImages, inUse: w.rt.ImagesInUse, remove: w.rt.RemoveImage,
		pinned:  func(name string) bool { return name == pause || name == a.cfg.PodInfraImage },
		removed: a.metrics.ImageGCRemoved,
		now:     time.Now, log: a.log.With("component", "imagegc"),
		firstSeen: map[string]time.Time{}, lastUsed: map[string]time.Time{},
	}
}

// nodeImagesTimeout bounds the image listing of one node status update;
// nodeImagesMaxAge is how long a listing serves status updates. A listing
// reads every image's manifest and config from containerd to size it: too
// much for each 10 s status update, so, as upstream's image cache, it is
// redone at most every 30 s.
const (
	nodeImagesTimeout = 5 * time.Second
	nodeImagesMaxAge  = 30 * time.Second
)

// nodeImages lists the images for status.images: names are the repo tags
// then the repo digests (nodestatus.ImageList sorts and cuts). A failed
// listing is not cached.
func nodeImages(ctx context.Context, list func(context.Context) ([]runtime.StoredImage, error), now func() time.Time) func() ([]corev1.ContainerImage, error) {
	var mu sync.Mutex
	var last []corev1.ContainerImage
	var at time.Time
	return func() ([]corev1.ContainerImage, error) {
		mu.Lock()
		defer mu.Unlock()
		if last != nil && now().Sub(at) < nodeImagesMaxAge {
			return last, nil
		}
		ctx, cancel := context.WithTimeout(ctx, nodeImagesTimeout)
		defer cancel()
		imgs, err := list(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]corev1.ContainerImage, 0, len(imgs))
		for _, img := range imgs {
			out = append(out, corev1.ContainerImage{Names: img.Names(), SizeBytes: img.Size})
		}
		last, at = out, now()
		return out, nil
	}
}
