package sdnotify

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeSystemd is the service manager's end of NOTIFY_SOCKET: a unixgram
// socket in a temporary directory whose datagrams the test reads. The
// Notifier under test uses its defaults (go-systemd's daemon package), so
// the real protocol is exercised.
type fakeSystemd struct {
	msgs chan string
}

// newFakeSystemd listens, points NOTIFY_SOCKET at the socket and, when
// watchdog > 0, asks for a watchdog of that timeout for this process.
func newFakeSystemd(t *testing.T, watchdog time.Duration) *fakeSystemd {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatalf("listen on fake notify socket: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	t.Setenv("WATCHDOG_USEC", "")
	t.Setenv("WATCHDOG_PID", "")
	if watchdog > 0 {
		t.Setenv("WATCHDOG_USEC", strconv.FormatInt(watchdog.Microseconds(), 10))
		t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	}
	f := &fakeSystemd{msgs: make(chan string, 1000)}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			f.msgs <- string(buf[:n])
		}
	}()
	return f
}

// waitFor returns the first message containing want, failing the test
// after timeout. Messages before it are returned too, in order.
func (f *fakeSystemd) waitFor(t *testing.T, want string, timeout time.Duration) []string {
	t.Helper()
	var seen []string
	deadline := time.After(timeout)
	for {
		select {
		case m := <-f.msgs:
			seen = append(seen, m)
			if strings.Contains(m, want) {
				return seen
			}
		case <-deadline:
			t.Fatalf("no %q within %v; got %q", want, timeout, seen)
			return nil
		}
	}
}

// during collects the messages received in d.
func (f *fakeSystemd) during(d time.Duration) []string {
	var seen []string
	deadline := time.After(d)
	for {
		select {
		case m := <-f.msgs:
			seen = append(seen, m)
		case <-deadline:
			return seen
		}
	}
}

func count(msgs []string, sub string) int {
	n := 0
	for _, m := range msgs {
		if strings.Contains(m, sub) {
			n++
		}
	}
	return n
}

func TestReadyOnlyAfterCheckPasses(t *testing.T) {
	sd := newFakeSystemd(t, 0)
	var ok atomic.Bool
	var calls atomic.Int32
	check := func(context.Context) error {
		calls.Add(1)
		if !ok.Load() {
			return errors.New("node not registered")
		}
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- New(Config{}).Ready(t.Context(), check, 10*time.Millisecond) }()

	seen := sd.waitFor(t, "STATUS=waiting: node not registered", 5*time.Second)
	seen = append(seen, sd.during(200*time.Millisecond)...)
	if n := count(seen, "READY=1"); n != 0 {
		t.Fatalf("READY=1 sent while the check fails: %q", seen)
	}
	if n := count(seen, "STATUS=waiting"); n != 1 {
		t.Errorf("STATUS=waiting sent %d times for one unchanged reason, want once: %q", n, seen)
	}
	if calls.Load() < 3 {
		t.Errorf("check called %d times in 200ms at a 10ms interval", calls.Load())
	}
	ok.Store(true)
	sd.waitFor(t, "READY=1\nSTATUS=ready", 5*time.Second)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Ready = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Ready did not return after READY=1")
	}
}

func TestReadyWithoutNotifySocketReturnsAtOnce(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	var calls atomic.Int32
	check := func(context.Context) error { calls.Add(1); return errors.New("never ready") }
	start := time.Now()
	if err := New(Config{}).Ready(context.Background(), check, time.Hour); err != nil {
		t.Fatalf("Ready = %v", err)
	}
	if d := time.Since(start); d > time.Second || calls.Load() != 0 {
		t.Errorf("Ready took %v and called check %d times; want at once, never", d, calls.Load())
	}
}

func TestReadyStopsWithContext(t *testing.T) {
	sd := newFakeSystemd(t, 0)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- New(Config{}).Ready(ctx, func(context.Context) error { return errors.New("no") }, 10*time.Millisecond)
	}()
	sd.waitFor(t, "STATUS=waiting", 5*time.Second)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Ready after cancel = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Ready did not return when ctx ended")
	}
	if seen := sd.during(50 * time.Millisecond); count(seen, "READY=1") != 0 {
		t.Errorf("READY=1 sent after cancel: %q", seen)
	}
}

// The watchdog pings while healthy, stops while not (so that systemd would
// restart the process), and resumes when healthy again.
func TestWatchdogPingsOnlyWhileHealthy(t *testing.T) {
	sd := newFakeSystemd(t, 100*time.Millisecond) // a ping every 50ms
	var healthy atomic.Bool
	healthy.Store(true)
	check := func(context.Context) error {
		if !healthy.Load() {
			return errors.New("PLEG is not healthy")
		}
		return nil
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- New(Config{}).Watchdog(ctx, check) }()

	sd.waitFor(t, "WATCHDOG=1", 5*time.Second)
	sd.waitFor(t, "WATCHDOG=1", 5*time.Second)

	healthy.Store(false)
	sd.waitFor(t, "STATUS=unhealthy: PLEG is not healthy", 5*time.Second)
	// Datagrams from one sender arrive in order: nothing after the
	// unhealthy status may be a ping, however long we look.
	if seen := sd.during(300 * time.Millisecond); count(seen, "WATCHDOG=1") != 0 || count(seen, "STATUS=unhealthy") != 0 {
		t.Fatalf("while unhealthy got %q, want no ping and no repeated status", seen)
	}

	healthy.Store(true)
	sd.waitFor(t, "WATCHDOG=1\nSTATUS=ready", 5*time.Second)
	sd.waitFor(t, "WATCHDOG=1", 5*time.Second)

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Watchdog = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Watchdog did not return when ctx ended")
	}
}

// A health check that hangs (ignoring its context) withholds the pings,
// starts no second check, and does not keep Watchdog from returning.
func TestWatchdogHungCheck(t *testing.T) {
	sd := newFakeSystemd(t, 100*time.Millisecond)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	var calls atomic.Int32
	check := func(context.Context) error {
		calls.Add(1)
		<-release
		return nil
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- New(Config{}).Watchdog(ctx, check) }()

	sd.waitFor(t, "STATUS=unhealthy: no answer within 25ms", 5*time.Second)
	if seen := sd.during(300 * time.Millisecond); count(seen, "WATCHDOG=1") != 0 {
		t.Fatalf("pinged while the check hangs: %q", seen)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("check started %d times while the first hangs, want 1", n)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Watchdog did not return while a check hangs")
	}
}

func TestWatchdogNotRequested(t *testing.T) {
	for name, pid := range map[string]string{"no WATCHDOG_USEC": "", "another process's": "1"} {
		t.Run(name, func(t *testing.T) {
			sd := newFakeSystemd(t, 0)
			if pid != "" {
				t.Setenv("WATCHDOG_USEC", "100000")
				t.Setenv("WATCHDOG_PID", pid)
			}
			var calls atomic.Int32
			err := New(Config{}).Watchdog(context.Background(), func(context.Context) error { calls.Add(1); return nil })
			if err != nil || calls.Load() != 0 {
				t.Errorf("Watchdog = %v after %d checks, want nil at once", err, calls.Load())
			}
			if seen := sd.during(50 * time.Millisecond); len(seen) != 0 {
				t.Errorf("sent %q", seen)
			}
		})
	}
}

// recorder is an injected Notify: it records the messages in order.
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) notify(state string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, state)
	return true, nil
}

func (r *recorder) sent(sub string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return count(r.msgs, sub) > 0
}

// Run: READY before the watchdog is even asked for, STOPPING=1 last.
func TestRunOrder(t *testing.T) {
	rec := &recorder{}
	watchdogAskedEarly := make(chan bool, 1)
	n := New(Config{
		Notify: rec.notify,
		WatchdogTimeout: func() (time.Duration, error) {
			watchdogAskedEarly <- !rec.sent("READY=1")
			return time.Second, nil
		},
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		n.Run(ctx, func(context.Context) error { return nil }, func(context.Context) error { return nil }, time.Millisecond)
		close(done)
	}()
	if early := <-watchdogAskedEarly; early {
		t.Error("the watchdog started before READY=1")
	}
	deadline := time.Now().Add(5 * time.Second)
	for !rec.sent("WATCHDOG=1") && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	rec.mu.Lock()
	defer rec.mu.Unlock()
	want := []string{"STATUS=starting", "READY=1\nSTATUS=ready", "WATCHDOG=1"}
	if len(rec.msgs) < 4 || rec.msgs[0] != want[0] || rec.msgs[1] != want[1] || rec.msgs[2] != want[2] ||
		rec.msgs[len(rec.msgs)-1] != "STOPPING=1\nSTATUS=stopping" {
		t.Errorf("messages = %q, want %q ... then STOPPING=1", rec.msgs, want)
	}
}
