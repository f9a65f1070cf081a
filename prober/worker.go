package prober

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// worker probes one probe of one container instance: it probes at once,
// then every periodSeconds (and when triggered), until its context is
// cancelled. The results it records pass the success and failure
// thresholds first.
type worker struct {
	m           *Manager
	uid         types.UID
	name        string // the container's
	typ         ProbeType
	containerID string        // without scheme
	spec        *corev1.Probe // defaulted
	startedAt   time.Time     // of the container instance
	cancel      context.CancelFunc
	triggerCh   chan struct{} // size 1: triggers coalesce

	// Owned by the worker's goroutine (or a test calling doProbe).
	lastResult Result
	resultRun  int  // how many probes in a row returned lastResult
	onHold     bool // liveness or startup failed: no more probes
}

func newWorker(m *Manager, e *entry, t ProbeType) *worker {
	return &worker{
		m:           m,
		uid:         e.uid,
		name:        e.container.Name,
		typ:         t,
		containerID: e.id,
		spec:        withDefaults(t.spec(e.container)),
		startedAt:   e.startedAt,
		triggerCh:   make(chan struct{}, 1),
	}
}

// trigger asks for a probe now; it never blocks.
func (w *worker) trigger() {
	select {
	case w.triggerCh <- struct{}{}:
	default:
	}
}

func (w *worker) stop() {
	if w.cancel != nil {
		w.cancel()
	}
}

// run is the worker's goroutine.
func (w *worker) run(ctx context.Context) {
	ticker := w.m.clock.NewTicker(time.Duration(w.spec.PeriodSeconds) * time.Second)
	defer ticker.Stop()
	for {
		untilDelay := w.doProbe(ctx)
		if !w.wait(ctx, ticker, untilDelay) {
			return
		}
	}
}

// wait returns after the next tick, a trigger or, when untilDelay > 0,
// the end of the initial delay (so that the first probe is not late by up
// to a period); false when ctx is done.
func (w *worker) wait(ctx context.Context, ticker clock.Ticker, untilDelay time.Duration) bool {
	var delayC <-chan time.Time
	if untilDelay > 0 {
		t := w.m.clock.NewTimer(untilDelay)
		defer t.Stop()
		delayC = t.C()
	}
	select {
	case <-ctx.Done():
		return false
	case <-ticker.C():
	case <-delayC:
	case <-w.triggerCh:
	}
	return true
}

// doProbe probes once unless the probe is gated, and records the result
// once it passes its threshold. It returns how long the initial delay
// still lasts (0 when over).
//
// Gates, as upstream's worker: nothing after a liveness or startup
// failure (until a new instance, which gets a new worker); nothing during
// initialDelaySeconds from the container's start; liveness and readiness
// only once started, startup only until then. A probe that errors is
// thrown away.
func (w *worker) doProbe(ctx context.Context) time.Duration {
	if w.onHold {
		return 0
	}
	tg, started, ok := w.m.snapshot(w)
	if !ok {
		return 0
	}
	delay := time.Duration(w.spec.InitialDelaySeconds) * time.Second
	if left := delay - w.m.clock.Since(w.startedAt); left > 0 {
		return left
	}
	if (w.typ == Startup) == started {
		return 0
	}
	start := w.m.clock.Now()
	result, output, err := w.m.h.probe(ctx, w.typ, w.spec, tg)
	if err != nil {
		return 0
	}
	if mt := w.m.cfg.Metrics; mt != nil && ctx.Err() == nil {
		mt.ObserveProbe(tg.pod, w.name, w.typ.String(), result.metricLabel(), w.m.clock.Since(start))
	}
	if !w.passesThreshold(result) {
		return 0
	}
	w.m.setResult(w, result, output)
	if result == Failure && (w.typ == Liveness || w.typ == Startup) {
		// The container is to be killed; do not probe a dying container.
		w.onHold = true
		w.resultRun = 0
	}
	return 0
}

// passesThreshold counts the result and reports whether it is to be
// recorded: after successThreshold successes or failureThreshold failures
// in a row.
func (w *worker) passesThreshold(r Result) bool {
	if r == w.lastResult {
		w.resultRun++
	} else {
		w.lastResult = r
		w.resultRun = 1
	}
	switch r {
	case Failure:
		return w.resultRun >= int(w.spec.FailureThreshold)
	case Success:
		return w.resultRun >= int(w.spec.SuccessThreshold)
	default:
		return true
	}
}
