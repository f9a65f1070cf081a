package runtime

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// ImageGCPolicy is the image garbage collection policy (upstream kubelet's
// images.ImageGCPolicy).
type ImageGCPolicy struct {
	// HighThresholdPercent is the image filesystem usage at which the
	// collection starts; LowThresholdPercent the usage it frees down to.
	HighThresholdPercent int
	LowThresholdPercent  int
	// MinAge is how long after it was first seen an unused image may go.
	MinAge time.Duration
}

// DefaultImageGCPolicy is upstream's default: 85%, 80%, 2 minutes.
var DefaultImageGCPolicy = ImageGCPolicy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: 2 * time.Minute}

// Validate checks the thresholds as upstream: within 0..100, low < high.
func (p ImageGCPolicy) Validate() error {
	if p.HighThresholdPercent < 0 || p.HighThresholdPercent > 100 {
		return fmt.Errorf("image gc: high threshold %d%% is not within 0..100", p.HighThresholdPercent)
	}
	if p.LowThresholdPercent < 0 || p.LowThresholdPercent > 100 {
		return fmt.Errorf("image gc: low threshold %d%% is not within 0..100", p.LowThresholdPercent)
	}
	if p.LowThresholdPercent >= p.HighThresholdPercent {
		return fmt.Errorf("image gc: low threshold %d%% is not below high threshold %d%%", p.LowThresholdPercent, p.HighThresholdPercent)
	}
	if p.MinAge < 0 {
		return fmt.Errorf("image gc: negative minimum age %s", p.MinAge)
	}
	return nil
}

// FSUsage is the capacity and the available bytes of a filesystem.
type FSUsage struct {
	Capacity  int64
	Available int64
}

// ImageRecord is one image as the image garbage collection sees it.
type ImageRecord struct {
	ID   string   // the config digest (one image, several names)
	Refs []string // its names in containerd
	Size int64
	// FirstSeen is when the nodelet first detected the image; LastUsed the
	// last collection pass at which a container used it (zero: never).
	FirstSeen, LastUsed time.Time
	// InUse: a container (running or not) references it. Pinned: never
	// removed (the sandbox image).
	InUse, Pinned bool
}

// PlanImageGC decides which images to remove, as upstream's kubelet: when
// the image filesystem's usage reaches HighThresholdPercent, it frees
// bytes down to LowThresholdPercent by removing images no container uses
// and that are not pinned, least recently used first (then first seen),
// skipping those first seen less than MinAge ago. It may free less than
// asked when too few images qualify.
func PlanImageGC(policy ImageGCPolicy, usage FSUsage, images []ImageRecord, now time.Time) []ImageRecord {
	toFree := BytesToFree(policy, usage)
	if toFree <= 0 {
		return nil
	}
	candidates := slices.DeleteFunc(slices.Clone(images), func(im ImageRecord) bool {
		return im.InUse || im.Pinned || now.Sub(im.FirstSeen) < policy.MinAge
	})
	slices.SortStableFunc(candidates, func(a, b ImageRecord) int {
		if c := a.LastUsed.Compare(b.LastUsed); c != 0 {
			return c
		}
		if c := a.FirstSeen.Compare(b.FirstSeen); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	var out []ImageRecord
	for _, im := range candidates {
		if toFree <= 0 {
			break
		}
		out = append(out, im)
		toFree -= im.Size
	}
	return out
}

// BytesToFree is how many bytes the collection frees at usage: none below
// the high threshold, else down to the low one. A high threshold of 100
// disables the collection, as upstream.
func BytesToFree(policy ImageGCPolicy, usage FSUsage) int64 {
	if usage.Capacity <= 0 || policy.HighThresholdPercent >= 100 {
		return 0
	}
	if 100-usage.Available*100/usage.Capacity < int64(policy.HighThresholdPercent) {
		return 0
	}
	return usage.Capacity*int64(100-policy.LowThresholdPercent)/100 - usage.Available
}
