package stats_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/stats"
)

// TestRunOnThisHost runs the collector on the host's /proc (the runtime is
// faked) until the node has a CPU rate, reading the Summary and the
// metrics while it samples, and checks the numbers are plausible.
func TestRunOnThisHost(t *testing.T) {
	rt := &fakeRuntime{}
	c, err := stats.New(stats.Config{NodeName: "host", Runtime: rt, Interval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Run did not return after cancel")
		}
	}()

	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		rt.set(nil, runtime.ContainerMetrics{PodUID: "u", PodName: "p", PodNamespace: "default", Name: "c", ID: "c1",
			StartedAt: time.Now().Add(-time.Minute), Timestamp: time.Now(), CPUUsageNanoseconds: uint64(i) * 1e6})
		s := c.Summary()
		scrape(t, c)
		if s.Node.CPU != nil && s.Node.CPU.UsageNanoCores != nil && len(s.Pods) == 1 && s.Pods[0].CPU.UsageNanoCores != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no node and pod CPU rates after 10s: %+v", s)
		}
		time.Sleep(5 * time.Millisecond)
	}
	node := c.Summary().Node
	if cores := float64(*node.CPU.UsageNanoCores) / 1e9; cores > 1024 {
		t.Errorf("node uses %.1f cores", cores)
	}
	m := node.Memory
	if *m.WorkingSetBytes == 0 || *m.WorkingSetBytes > *m.UsageBytes || *m.AvailableBytes == 0 || *m.PageFaults == 0 {
		t.Errorf("node memory: ws %d usage %d available %d faults %d", *m.WorkingSetBytes, *m.UsageBytes, *m.AvailableBytes, *m.PageFaults)
	}
	if boot := node.StartTime.Time; boot.After(time.Now()) || boot.Before(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("boot time %v", boot)
	}
	if got := scrape(t, c); !strings.Contains(got, "\nscrape_error 0\n") || !strings.Contains(got, "\nnode_cpu_usage_seconds_total ") {
		t.Errorf("metrics:\n%s", got)
	}
}
