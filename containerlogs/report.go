package containerlogs

import (
	"context"
	"log/slog"
	"time"
)

// EventLogDropped is the reason of the Warning event on a pod whose
// container's log started dropping output (upstream has no such event).
const EventLogDropped = "ContainerLogDropped"

// DropMetrics counts the output the containers' logs dropped
// (kubeletmetrics.Metrics).
type DropMetrics interface {
	ContainerLogDropped(bytes, lines uint64)
}

// DropReporterConfig configures a DropReporter.
type DropReporterConfig struct {
	// Drops asks the Logger (Client.Drops).
	Drops func(context.Context) (map[string]Drops, error)
	// Metrics counts what was dropped since the last poll; nil: nothing.
	Metrics DropMetrics
	// Started is called once for each episode of dropping seen, with the
	// container's ID and counts (the nodelet's event on the pod).
	Started func(id string, d Drops)
	// Interval between polls (10s when 0).
	Interval time.Duration
	Log      *slog.Logger
}

// DropReporter polls the Logger for the containers whose logs dropped
// output and reports the news: the bytes and lines dropped since the last
// poll to the metrics, and each new episode to Started. The Logger is
// asked, never told: it does not know the nodelet.
type DropReporter struct {
	cfg  DropReporterConfig
	last map[string]Drops
}

// NewDropReporter returns a reporter; Run polls.
func NewDropReporter(cfg DropReporterConfig) *DropReporter {
	if cfg.Interval <= 0 {
		cfg.Interval = 10 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &DropReporter{cfg: cfg, last: map[string]Drops{}}
}

// Run polls until ctx ends.
func (r *DropReporter) Run(ctx context.Context) error {
	tick := time.NewTicker(r.cfg.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		drops, err := r.cfg.Drops(ctx)
		if err != nil {
			if ctx.Err() == nil {
				r.cfg.Log.Warn("container log drops unknown", "err", err)
			}
			continue
		}
		r.observe(drops)
	}
}

// observe reports what changed since the last poll. A container whose
// counts went down has a new Logger (the old one died): its counts are
// all new. Containers no longer listed are forgotten.
func (r *DropReporter) observe(now map[string]Drops) {
	var bytes, lines uint64
	for id, d := range now {
		prev := r.last[id]
		if d.Bytes < prev.Bytes || d.Lines < prev.Lines || d.Episodes < prev.Episodes {
			prev = Drops{}
		}
		bytes += d.Bytes - prev.Bytes
		lines += d.Lines - prev.Lines
		if d.Episodes > prev.Episodes && r.cfg.Started != nil {
			r.cfg.Started(id, d)
		}
	}
	r.last = now
	if r.last == nil {
		r.last = map[string]Drops{}
	}
	if (bytes > 0 || lines > 0) && r.cfg.Metrics != nil {
		r.cfg.Metrics.ContainerLogDropped(bytes, lines)
	}
}
