package podworkers

import (
	"context"
	"errors"
	"time"
)

// waitForever is the delay of a worker with nothing to do until an update.
const waitForever = time.Duration(-1)

// loop is the goroutine of one pod. The first update has already been
// signalled on wk.wake.
func (w *Workers) loop(wk *worker) {
	defer w.wg.Done()
	delay := waitForever
	for {
		if !w.wait(wk, delay) {
			return
		}
		var exit bool
		delay, exit = w.step(wk)
		if exit {
			return
		}
	}
}

// wait waits for an update, for delay (if not negative) or for Shutdown;
// it reports false on Shutdown.
func (w *Workers) wait(wk *worker, delay time.Duration) bool {
	if delay == 0 {
		select {
		case <-wk.wake: // the step reads the latest update anyway
		default:
		}
		return w.ctx.Err() == nil
	}
	var timeout <-chan time.Time
	if delay > 0 {
		t := w.cfg.Clock.NewTimer(delay)
		defer t.Stop()
		timeout = t.C()
	}
	select {
	case <-wk.wake:
	case <-timeout:
	case <-w.ctx.Done():
		return false
	}
	return true
}

// step runs one call for the pod and returns how long to wait before the
// next one, or exit once the pod is cleaned up (or on Shutdown).
func (w *Workers) step(wk *worker) (delay time.Duration, exit bool) {
	w.mu.Lock()
	if wk.phase == phaseSyncing && wk.killRequested {
		wk.phase = phaseTerminating
	}
	ph, pod, grace := wk.phase, wk.pod, wk.gracePeriod
	ctx, cancel := context.WithCancel(w.ctx)
	wk.busy, wk.running, wk.cancel = true, ph, cancel
	w.mu.Unlock()

	var err error
	var res SyncResult
	switch ph {
	case phaseSyncing:
		res, err = w.cfg.Syncer.SyncPod(ctx, pod)
	case phaseTerminating:
		err = w.cfg.Syncer.SyncTerminatingPod(ctx, pod, grace)
	case phaseTerminated:
		err = w.cfg.Syncer.SyncTerminatedPod(ctx, pod)
	}
	cancelled := ctx.Err() != nil
	cancel()

	w.mu.Lock()
	defer w.mu.Unlock()
	wk.busy, wk.cancel = false, nil
	if w.ctx.Err() != nil {
		return 0, true // Shutdown: leave the pod as it is
	}
	if err != nil {
		if cancelled && errors.Is(err, context.Canceled) {
			return 0, false // a kill (or shorter grace) made the call stale
		}
		wk.failures++
		delay = w.backoff(wk.failures)
		w.cfg.Log.Warn("pod worker call failed, retrying", "pod", pod.Namespace+"/"+pod.Name,
			"uid", wk.uid, "phase", ph.String(), "retryIn", delay, "err", err)
		return delay, false
	}
	wk.failures = 0
	switch ph {
	case phaseSyncing:
		if res.Finished {
			w.requestKill(wk, gracePeriod(UpdateOptions{Pod: pod}))
			w.publish()
			return 0, false // the next step terminates the pod
		}
		delay = w.cfg.ResyncInterval
		if after := res.ResyncAfter; after > 0 && after < delay {
			delay = after
		}
		return delay, false
	case phaseTerminating:
		wk.phase = phaseTerminated
		w.publish()
		return 0, false
	}
	// Cleaned up: forget the pod; remember it while its API object exists
	// so that it is never started again.
	delete(w.workers, wk.uid)
	if !wk.removed {
		w.finished[wk.uid] = true
	}
	w.publish()
	return 0, true
}

// backoff is the delay after the n-th consecutive failure.
func (w *Workers) backoff(n int) time.Duration {
	d := w.cfg.BackoffBase
	for i := 1; i < n && d < w.cfg.ResyncInterval; i++ {
		d *= 2
	}
	return min(d, w.cfg.ResyncInterval)
}

func (p phase) String() string {
	switch p {
	case phaseSyncing:
		return "sync"
	case phaseTerminating:
		return "terminating"
	case phaseTerminated:
		return "terminated"
	}
	return "unknown"
}
