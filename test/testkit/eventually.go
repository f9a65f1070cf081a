// Package testkit holds the helpers nodelet's tests share: polling for a
// condition, requiring root, and running code in a network namespace of
// the test's own. Each helper fails the test (t.Fatalf) instead of
// skipping it: a skipped root-only test would count as a pass.
//
// The loopback image registry lives in the subpackage testregistry, so
// that tests which only poll do not link containerd's registry client.
package testkit

import (
	"context"
	"testing"
	"time"
)

// Condition is what Eventually polls: a plain predicate, one whose error
// says why it does not hold yet, or one that calls the API and so takes
// a context (its deadline is Eventually's).
type Condition interface {
	func() bool | func() (bool, error) | func(context.Context) (bool, error)
}

// maxInterval caps the polling interval. It starts at a millisecond and
// doubles, so a condition that holds at once (a goroutine, a fake clock)
// is seen at once, while a slow one (an API server, a process) is not
// asked more than ten times a second.
const maxInterval = 100 * time.Millisecond

// Eventually calls cond until it returns true, and fails the test with
// t.Fatalf, naming what it waited for and the last error cond returned,
// when timeout passes first. An error does not end the wait: it says why
// cond does not hold yet (a conflict, an object not there yet), and a
// later call may succeed. A condition that must fail the test at once
// calls t.Fatal itself: cond runs on the caller's goroutine.
//
// The context given to cond is not t.Context(), which is canceled before
// the test's Cleanup functions run, where waiting for something to stop
// is common; it ends with the wait.
func Eventually[C Condition](t testing.TB, timeout time.Duration, what string, cond C) {
	t.Helper()
	check := asCheck(cond)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	for interval := time.Millisecond; ; interval = min(2*interval, maxInterval) {
		ok, err := check(ctx)
		if ok {
			return
		}
		if err != nil && ctx.Err() == nil { // not the deadline cutting cond short
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				t.Fatalf("timed out after %s waiting for %s; last error: %v", timeout, what, last)
			}
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		case <-time.After(interval):
		}
	}
}

// asCheck gives every Condition the widest shape.
func asCheck[C Condition](cond C) func(context.Context) (bool, error) {
	switch c := any(cond).(type) {
	case func() bool:
		return func(context.Context) (bool, error) { return c(), nil }
	case func() (bool, error):
		return func(context.Context) (bool, error) { return c() }
	case func(context.Context) (bool, error):
		return c
	}
	panic("unreachable: Condition has three shapes")
}
