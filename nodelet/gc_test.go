package nodelet

import (
	"testing"
	"time"
)

// fakeImages is an image store for the collector.
// The collector remembers first detection and last use across passes: a
// just detected image is too young, then the least recently used goes.
// On a real containerd: with the usage injected at 90% of a disk the
// images fill, the collector removes the unused image and keeps the one a
// container references and the sandbox image.
func TestImageGCConfig(t *testing.T) {
	cfg := Config{}
	if err := setImageGCDefaults(&cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.ImageGCHighThresholdPercent != 85 || cfg.ImageGCLowThresholdPercent != 80 || cfg.ImageMinimumGCAge != 2*time.Minute {
		t.Errorf("defaults %d %d %s, want 85 80 2m", cfg.ImageGCHighThresholdPercent, cfg.ImageGCLowThresholdPercent, cfg.ImageMinimumGCAge)
	}
	for _, c := range []Config{{ImageGCHighThresholdPercent: 70}, {ImageGCLowThresholdPercent: 90}, {ImageGCHighThresholdPercent: 101}} {
		if err := setImageGCDefaults(&c); err == nil {
			t.Errorf("%d/%d: valid, want an error", c.ImageGCHighThresholdPercent, c.ImageGCLowThresholdPercent)
		}
	}
}

// TestNodeImagesCached: status updates come every 10 s, the listing at
// most every nodeImagesMaxAge; a failed listing is retried at once.
