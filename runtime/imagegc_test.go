package runtime

import (
	"testing"
	"time"
)

func TestPlanImageGC(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	old := now.Add(-time.Hour)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	policy := DefaultImageGCPolicy
	// 90% used of 1000: frees 100 bytes down to 80%.
	full := FSUsage{Capacity: 1000, Available: 100}
	tests := []struct {
		name   string
		usage  FSUsage
		images []ImageRecord
		want   []string
	}{
		{"below high threshold", FSUsage{Capacity: 1000, Available: 160},
			[]ImageRecord{{ID: "a", Size: 500, FirstSeen: old}}, nil},
		{"at high threshold", FSUsage{Capacity: 1000, Available: 150},
			[]ImageRecord{{ID: "a", Size: 10, FirstSeen: old}, {ID: "b", Size: 10, FirstSeen: old}}, []string{"a", "b"}},
		{"no capacity", FSUsage{}, []ImageRecord{{ID: "a", Size: 10, FirstSeen: old}}, nil},
		{"least recently used first, stops when freed", full, []ImageRecord{
			{ID: "recent", Size: 80, FirstSeen: old, LastUsed: ago(time.Minute)},
			{ID: "older", Size: 80, FirstSeen: old, LastUsed: ago(10 * time.Minute)},
			{ID: "never", Size: 30, FirstSeen: old},
			{ID: "spare", Size: 80, FirstSeen: old, LastUsed: ago(2 * time.Minute)},
		}, []string{"never", "older"}},
		{"ties broken by first seen", full, []ImageRecord{
			{ID: "b", Size: 100, FirstSeen: ago(3 * time.Hour)},
			{ID: "a", Size: 100, FirstSeen: ago(4 * time.Hour)},
		}, []string{"a"}},
		{"in use, pinned and young images stay", full, []ImageRecord{
			{ID: "used", Size: 500, FirstSeen: old, InUse: true},
			{ID: "pause", Size: 500, FirstSeen: old, Pinned: true},
			{ID: "young", Size: 500, FirstSeen: ago(time.Minute)},
			{ID: "free", Size: 20, FirstSeen: ago(2 * time.Minute)},
		}, []string{"free"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, im := range PlanImageGC(policy, tt.usage, tt.images, now) {
				got = append(got, im.ID)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("removed %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("removed %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestBytesToFree(t *testing.T) {
	if got := BytesToFree(DefaultImageGCPolicy, FSUsage{Capacity: 1000, Available: 100}); got != 100 {
		t.Errorf("90%% used: free %d, want 100", got)
	}
	if got := BytesToFree(ImageGCPolicy{HighThresholdPercent: 100, LowThresholdPercent: 80}, FSUsage{Capacity: 1000}); got != 0 {
		t.Errorf("high threshold 100, full disk: free %d, want 0 (disabled)", got)
	}
	if got := BytesToFree(DefaultImageGCPolicy, FSUsage{Capacity: 1000, Available: 500}); got != 0 {
		t.Errorf("50%% used: free %d, want 0", got)
	}
}

func TestImageGCPolicyValidate(t *testing.T) {
	for _, p := range []ImageGCPolicy{
		{HighThresholdPercent: 80, LowThresholdPercent: 80},
		{HighThresholdPercent: 101, LowThresholdPercent: 80},
		{HighThresholdPercent: 85, LowThresholdPercent: -1},
		{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: -time.Second},
	} {
		if p.Validate() == nil {
			t.Errorf("%+v: valid, want an error", p)
		}
	}
	if err := DefaultImageGCPolicy.Validate(); err != nil {
		t.Errorf("default policy: %v", err)
	}
}
