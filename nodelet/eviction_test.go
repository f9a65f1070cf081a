package nodelet

import (
	"testing"
	"time"

	"github.com/nodelet/nodelet/runtime"
)

// The status an evicted pod ends with is Failed/Evicted whatever its
// stopped containers made of it, once; other pods are left alone.

// The collector used under disk pressure has thresholds 0/0: whatever the
// usage it asks for all the used space back, so the plan takes every
// unused image past its minimum age (upstream's DeleteUnusedImages, which
// the images' own bytes on that filesystem bound), not down to a low
// threshold.
func TestEvictionImageGCFreesAllUnused(t *testing.T) {
	p := runtime.ImageGCPolicy{MinAge: time.Minute}
	if got := runtime.BytesToFree(p, runtime.FSUsage{Capacity: 100, Available: 90}); got != 10 {
		t.Errorf("BytesToFree at 10%% used = %d, want all 10 used bytes", got)
	}
	now := time.Now()
	imgs := []runtime.ImageRecord{
		{ID: "old", Size: 4, FirstSeen: now.Add(-time.Hour)},
		{ID: "used", Size: 4, FirstSeen: now.Add(-time.Hour), InUse: true},
		{ID: "new", Size: 4, FirstSeen: now},
		{ID: "old2", Size: 4, FirstSeen: now.Add(-time.Hour)},
	}
	got := runtime.PlanImageGC(p, runtime.FSUsage{Capacity: 1000, Available: 980}, imgs, now)
	if len(got) != 2 || got[0].ID != "old" || got[1].ID != "old2" {
		t.Errorf("plan = %+v, want old and old2", got)
	}
}
