package gc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodelet/nodelet/runtime"
)

// Images removes unused images when the image filesystem fills up:
// runtime.PlanImageGC decides from a fresh listing, Collect removes. It
// remembers in memory when it first saw each image (at the nodelet's
// start for those already there) and when a container last used it.
type Images struct {
	Policy runtime.ImageGCPolicy
	// Usage measures the image filesystem (StatfsUsage).
	Usage  func(ctx context.Context) (runtime.FSUsage, error)
	List   func(ctx context.Context) ([]runtime.StoredImage, error)
	InUse  func(ctx context.Context) (map[string]bool, error)
	Remove func(ctx context.Context, img runtime.StoredImage) error
	// Pinned tells whether a name is one of a never removed image (the
	// sandbox image).
	Pinned func(name string) bool
	// Removed, optional, counts each removed image by reason ("space":
	// the only one, there is no maximum age;
	// kubelet_image_garbage_collected_total).
	Removed func(reason string)
	Now     func() time.Time
	Log     *slog.Logger

	firstSeen, lastUsed map[string]time.Time // by image ID
}

// Collect runs one image garbage collection; every removal is tried and
// the errors are joined.
func (g *Images) Collect(ctx context.Context) error {
	records, err := g.Detect(ctx)
	if err != nil {
		return fmt.Errorf("image gc: %w", err)
	}
	usage, err := g.Usage(ctx)
	if err != nil {
		return fmt.Errorf("image gc: %w", err)
	}
	var errs []error
	for _, r := range runtime.PlanImageGC(g.Policy, usage, records, g.Now()) {
		img := runtime.StoredImage{ID: r.ID, Records: r.Refs, Size: r.Size}
		if err := g.Remove(ctx, img); err != nil {
			errs = append(errs, fmt.Errorf("image gc: remove image %s %v: %w", r.ID, r.Refs, err))
			continue
		}
		delete(g.firstSeen, r.ID)
		delete(g.lastUsed, r.ID)
		if g.Removed != nil {
			g.Removed("space")
		}
		g.Log.Info("removed unused image", "image", r.ID, "names", r.Refs, "size", r.Size, "lastUsed", r.LastUsed)
	}
	return errors.Join(errs...)
}

// Detect lists the images, updates first seen and last used and returns
// the plan's records.
func (g *Images) Detect(ctx context.Context) ([]runtime.ImageRecord, error) {
	imgs, err := g.List(ctx)
	if err != nil {
		return nil, err
	}
	used, err := g.InUse(ctx)
	if err != nil {
		return nil, err
	}
	now := g.Now()
	if g.firstSeen == nil {
		g.firstSeen, g.lastUsed = map[string]time.Time{}, map[string]time.Time{}
	}
	present := map[string]bool{}
	records := make([]runtime.ImageRecord, 0, len(imgs))
	for _, img := range imgs {
		present[img.ID] = true
		if _, ok := g.firstSeen[img.ID]; !ok {
			g.firstSeen[img.ID] = now
		}
		r := runtime.ImageRecord{ID: img.ID, Refs: img.Records, Size: img.Size, FirstSeen: g.firstSeen[img.ID],
			InUse:  slices.ContainsFunc(img.Records, func(n string) bool { return used[n] }),
			Pinned: slices.ContainsFunc(img.Names(), g.Pinned)}
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

// StatfsUsage measures the filesystem holding path.
func StatfsUsage(path string) (runtime.FSUsage, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return runtime.FSUsage{}, fmt.Errorf("statfs image filesystem %s: %w", path, err)
	}
	return runtime.FSUsage{Capacity: int64(st.Blocks) * st.Bsize, Available: int64(st.Bavail) * st.Bsize}, nil
}
