// Package sdnotify tells systemd how a daemon is doing (sd_notify(3)):
// READY=1 once the daemon really serves, WATCHDOG=1 only while it is
// healthy, STOPPING=1 when it shuts down. Without a service manager
// (NOTIFY_SOCKET unset) every call returns at once and sends nothing, so
// the binaries behave the same outside systemd.
//
// The order is a contract: Watchdog starts only after Ready has sent
// READY=1. systemd arms the watchdog when start-up completes, but a
// WATCHDOG=1 received earlier arms it already, and a daemon still waiting
// for its dependencies (unhealthy, so not pinging) would then be killed by
// the watchdog instead of by TimeoutStartSec=. Run keeps that order.
package sdnotify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// DefaultCheckTimeout bounds one readiness or health check.
const DefaultCheckTimeout = 5 * time.Second

// Config configures a Notifier. Zero fields take the defaults, which speak
// to the real service manager.
type Config struct {
	// Notify sends one message (newline-separated VAR=value assignments)
	// and reports whether a service manager received it: (false, nil)
	// means there is none (NOTIFY_SOCKET unset). Default: daemon.SdNotify,
	// leaving NOTIFY_SOCKET set (NotifyAccess=main ignores children).
	Notify func(state string) (sent bool, err error)
	// WatchdogTimeout returns the watchdog timeout systemd set for this
	// process (WatchdogSec=; WATCHDOG_USEC and WATCHDOG_PID), 0 for none.
	// Default: daemon.SdWatchdogEnabled.
	WatchdogTimeout func() (time.Duration, error)
	// CheckTimeout bounds each readiness check, and each health check up
	// to a quarter of the watchdog timeout (default DefaultCheckTimeout).
	CheckTimeout time.Duration
	// ReadyStatus is the STATUS= text sent with READY=1 and again when
	// the daemon is healthy after a spell of not being (default "ready").
	ReadyStatus string
	Log         *slog.Logger
}

// Notifier sends the daemon's state to systemd. Its methods are safe for
// concurrent use.
type Notifier struct {
	notify       func(string) (bool, error)
	watchdog     func() (time.Duration, error)
	checkTimeout time.Duration
	readyStatus  string
	log          *slog.Logger
}

// New fills in cfg's defaults.
func New(cfg Config) *Notifier {
	n := &Notifier{notify: cfg.Notify, watchdog: cfg.WatchdogTimeout, checkTimeout: cfg.CheckTimeout,
		readyStatus: cfg.ReadyStatus, log: cfg.Log}
	if n.notify == nil {
		n.notify = func(state string) (bool, error) { return daemon.SdNotify(false, state) }
	}
	if n.watchdog == nil {
		n.watchdog = func() (time.Duration, error) { return daemon.SdWatchdogEnabled(false) }
	}
	if n.checkTimeout <= 0 {
		n.checkTimeout = DefaultCheckTimeout
	}
	if n.readyStatus == "" {
		n.readyStatus = "ready"
	}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	n.log = n.log.With("component", "sdnotify")
	return n
}

// Run is the whole conversation: Ready, then Watchdog, and STOPPING=1 once
// ctx ends (the daemon is shutting down). It returns when ctx ends.
// Failures to speak to systemd are logged, never fatal: the daemon serves
// anyway, and systemd acts on the missing messages (start timeout,
// watchdog).
func (n *Notifier) Run(ctx context.Context, ready, healthy func(context.Context) error, interval time.Duration) {
	err := n.Ready(ctx, ready, interval)
	if err == nil && ctx.Err() == nil {
		err = n.Watchdog(ctx, healthy)
	}
	if err != nil {
		n.log.Error("notify systemd", "err", err)
	}
	<-ctx.Done()
	n.Stopping()
}

// Ready calls check every interval until it succeeds, then sends READY=1
// with STATUS=. While check fails, STATUS= says why (sent when the reason
// changes), so that `systemctl status` shows what start-up waits for.
// Without a service manager it returns nil at once; it returns nil, having
// sent nothing more, when ctx ends first.
func (n *Notifier) Ready(ctx context.Context, check func(context.Context) error, interval time.Duration) error {
	sent, err := n.notify("STATUS=starting")
	if err != nil {
		return fmt.Errorf("sdnotify: send STATUS: %w", err)
	}
	if !sent {
		return nil // no service manager
	}
	t := time.NewTicker(max(interval, time.Millisecond))
	defer t.Stop()
	c := &checker{f: check}
	var last string
	for {
		err := c.run(ctx, n.checkTimeout)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			break
		}
		if why := oneLine(err); why != last {
			last = why
			n.log.Info("not ready yet", "err", err)
			n.send("STATUS=waiting: " + why)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
	if _, err := n.notify("READY=1\nSTATUS=" + n.readyStatus); err != nil {
		return fmt.Errorf("sdnotify: send READY: %w", err)
	}
	n.log.Info("told systemd: ready")
	return nil
}

// Watchdog pings systemd's watchdog (WATCHDOG=1) every half of its
// timeout, but only while healthy succeeds within the check timeout: a
// process that hangs or stays unhealthy stops pinging, and systemd kills
// and restarts it after WatchdogSec=. Each withheld ping is logged (and
// STATUS= says why). Without a watchdog it returns nil at once; otherwise
// it returns nil when ctx ends. Call it only after Ready (see the package
// comment).
func (n *Notifier) Watchdog(ctx context.Context, healthy func(context.Context) error) error {
	timeout, err := n.watchdog()
	if err != nil {
		return fmt.Errorf("sdnotify: watchdog timeout: %w", err)
	}
	if timeout <= 0 {
		return nil
	}
	period := max(timeout/2, time.Millisecond)
	// A check that takes its whole budget delays the ping by at most a
	// quarter of the timeout: a healthy daemon is never killed for it.
	checkTimeout := min(n.checkTimeout, timeout/4)
	n.log.Info("watchdog enabled", "timeout", timeout, "ping", period)
	t := time.NewTicker(period)
	defer t.Stop()
	c := &checker{f: healthy}
	withholding := false
	for {
		err := c.run(ctx, checkTimeout)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			n.log.Warn("unhealthy: withholding the watchdog ping; systemd restarts the service if this lasts",
				"err", err, "watchdogTimeout", timeout)
			if !withholding {
				n.send("STATUS=unhealthy: " + oneLine(err))
			}
			withholding = true
		case withholding:
			n.log.Info("healthy again: watchdog pings resume")
			n.send("WATCHDOG=1\nSTATUS=" + n.readyStatus)
			withholding = false
		default:
			n.send("WATCHDOG=1")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Stopping sends STOPPING=1: the daemon has begun to shut down, so systemd
// shows it as deactivating (and expects no more watchdog pings).
func (n *Notifier) Stopping() {
	n.send("STOPPING=1\nSTATUS=stopping")
}

// checker runs a check with a deadline without ever waiting for it past
// the deadline, so that a check ignoring its context can neither hang the
// caller's shutdown nor keep pinging the watchdog. While such a check is
// still running, no second one starts (no pile-up): the check fails.
type checker struct {
	f       func(context.Context) error
	pending chan error // result of a check that outlived its deadline
}

func (c *checker) run(ctx context.Context, timeout time.Duration) error {
	if c.pending != nil {
		select {
		case <-c.pending:
			c.pending = nil
		default:
			return errors.New("the previous check has not returned yet")
		}
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.f(cctx) }()
	select {
	case err := <-done:
		if err == nil && cctx.Err() != nil && ctx.Err() == nil {
			// A late answer does not count: "within the timeout" is the contract.
			err = fmt.Errorf("check took longer than %v: %w", timeout, cctx.Err())
		}
		return err
	case <-cctx.Done():
		c.pending = done
		return fmt.Errorf("no answer within %v: %w", timeout, cctx.Err())
	}
}

// send sends state, logging (not returning) a failure: the callers carry
// on, and systemd notices what it does not get.
func (n *Notifier) send(state string) {
	if _, err := n.notify(state); err != nil {
		n.log.Warn("notify systemd", "state", strings.ReplaceAll(state, "\n", " "), "err", err)
	}
}

// oneLine is err's text fit for STATUS=, which ends at a newline.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
