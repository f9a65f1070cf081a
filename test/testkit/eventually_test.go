package testkit

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// fatalTB records a Fatalf and ends the goroutine, as testing's does.
type fatalTB struct {
	testing.TB // nil: a call to anything else panics
	msg        string
}

func (f *fatalTB) Helper()      {}
func (f *fatalTB) Name() string { return "TestFake" }
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls fn with a fatalTB on a goroutine of its own and returns the
// Fatalf message, "" when there was none.
func run(fn func(t testing.TB)) string {
	f := &fatalTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f.msg
}

func TestEventuallyHolds(t *testing.T) {
	n := 0
	Eventually(t, 5*time.Second, "three calls", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Errorf("cond called %d times, want 3", n)
	}
	errs := 0
	Eventually(t, 5*time.Second, "past errors", func() (bool, error) {
		if errs < 2 {
			errs++
			return false, errors.New("not yet")
		}
		return true, nil
	})
	Eventually(t, 5*time.Second, "a context", func(ctx context.Context) (bool, error) {
		_, ok := ctx.Deadline()
		if !ok {
			t.Error("cond's context has no deadline")
		}
		return true, nil
	})
}

func TestEventuallyTimesOut(t *testing.T) {
	start := time.Now()
	msg := run(func(tb testing.TB) {
		Eventually(tb, 50*time.Millisecond, "the impossible", func() bool { return false })
	})
	if want := "timed out after 50ms waiting for the impossible"; msg != want {
		t.Errorf("Fatalf(%q), want %q", msg, want)
	}
	if d := time.Since(start); d < 50*time.Millisecond || d > 2*time.Second {
		t.Errorf("gave up after %s, want 50ms", d)
	}
}

func TestEventuallyReportsLastError(t *testing.T) {
	i := 0
	msg := run(func(tb testing.TB) {
		Eventually(tb, 50*time.Millisecond, "an object", func() (bool, error) {
			i++
			if i == 1 {
				return false, errors.New("first")
			}
			return false, fmt.Errorf("attempt %d", i)
		})
	})
	if !strings.HasPrefix(msg, "timed out after 50ms waiting for an object; last error: attempt ") {
		t.Errorf("Fatalf(%q), want the last error", msg)
	}
	if i < 3 {
		t.Errorf("cond called %d times in 50ms: not polled", i)
	}
}

// A context condition's own deadline error is not "the last error": the
// one before it says more.
func TestEventuallyKeepsErrorBeforeDeadline(t *testing.T) {
	msg := run(func(tb testing.TB) {
		Eventually(tb, 50*time.Millisecond, "a slow API", func(ctx context.Context) (bool, error) {
			if _, ok := ctx.Deadline(); !ok {
				return false, errors.New("no deadline")
			}
			select {
			case <-ctx.Done():
				return false, ctx.Err()
			case <-time.After(5 * time.Millisecond):
				return false, errors.New("conflict")
			}
		})
	})
	if want := "timed out after 50ms waiting for a slow API; last error: conflict"; msg != want {
		t.Errorf("Fatalf(%q), want %q", msg, want)
	}
}
