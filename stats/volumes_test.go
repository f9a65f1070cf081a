package stats_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/stats"
	"github.com/nodelet/nodelet/test/testkit"
)

type fakeVolumes map[types.UID][]statsv1alpha1.VolumeStats

func (f fakeVolumes) VolumeStats(context.Context) (map[types.UID][]statsv1alpha1.VolumeStats, error) {
	return f, nil
}

type recordedClaims struct {
	mu   sync.Mutex
	last []statsv1alpha1.VolumeStats
}

func (r *recordedClaims) SetVolumeStats(vs []statsv1alpha1.VolumeStats) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = vs
}

func (r *recordedClaims) get() []statsv1alpha1.VolumeStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// Run measures the volumes; the Summary lists them under their pod and
// the metrics sink gets only the claim-backed ones.
func TestVolumeStatsInSummary(t *testing.T) {
	used := uint64(4096)
	vols := fakeVolumes{"uid-web": {
		{Name: "scratch", FsStats: statsv1alpha1.FsStats{UsedBytes: &used}},
		{Name: "data", PVCRef: &statsv1alpha1.PVCReference{Name: "data", Namespace: "default"}, FsStats: statsv1alpha1.FsStats{UsedBytes: &used}},
	}}
	rt := &fakeRuntime{}
	rt.set(nil, cm("web", "", "sb", 0, 1, 1), cm("web", "app", "c1", 0, 1, 1))
	sink := &recordedClaims{}
	c, err := stats.New(stats.Config{NodeName: "node-1", Runtime: rt, Volumes: vols, VolumeMetrics: sink,
		Interval: time.Hour, VolumeInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() { cancel(); <-done }()
	testkit.Eventually(t, 5*time.Second, "the volumes measured", func() bool { return len(sink.get()) == 1 })
	if got := sink.get()[0]; got.Name != "data" {
		t.Errorf("metrics got %q, want the claim volume", got.Name)
	}
	s := c.Summary()
	if len(s.Pods) != 1 || len(s.Pods[0].VolumeStats) != 2 || *s.Pods[0].VolumeStats[0].UsedBytes != 4096 {
		t.Fatalf("summary pods %+v, want web with two volumes", s.Pods)
	}
}
