package apiserver

import (
	"context"
	"errors"
	"net/http"
	"os"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/authentication/user"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
)

// Upstream's defaults for the classic in-flight limiter and the request
// timeout (kube-apiserver's --max-requests-inflight,
// --max-mutating-requests-inflight and --request-timeout).
const (
	DefaultMaxRequestsInflight         = 400
	DefaultMaxMutatingRequestsInflight = 200
	DefaultRequestTimeout              = time.Minute
)

// Connection timeouts of the HTTPS server, upstream's secure serving's.
const (
	readHeaderTimeout = 32 * time.Second
	idleTimeout       = 90 * time.Second
	// writeGrace is how long past its deadline a request's response may
	// still be written.
	writeGrace = 5 * time.Second
)

// inflight is upstream's classic limiter: a request that is not
// long-running takes a slot of its kind (read-only or mutating) for its
// duration; with no slot free it is refused at once with 429 and
// Retry-After: 1. system:masters is never limited, as upstream's.
type inflight struct {
	readonly, mutating chan struct{} // nil: no limit
}

func newInflight(readonly, mutating int) *inflight {
	in := &inflight{}
	if readonly > 0 {
		in.readonly = make(chan struct{}, readonly)
	}
	if mutating > 0 {
		in.mutating = make(chan struct{}, mutating)
	}
	return in
}

// acquire takes a slot for r, or returns false when none is free.
func (in *inflight) acquire(r *http.Request) (release func(), ok bool) {
	slots := in.readonly
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		slots = in.mutating
	}
	if slots == nil {
		return func() {}, true
	}
	select {
	case slots <- struct{}{}:
		return func() { <-slots }, true
	default:
		return nil, false
	}
}

// longRunning reports whether a request may last as long as its client
// wants, as upstream's BasicLongRunningRequestCheck: watches, and the
// attach, exec, log, portforward and proxy subresources. Those take no
// in-flight slot and get no deadline.
func longRunning(info requestInfo, isResource bool) bool {
	if !isResource {
		return false
	}
	if info.Verb == "watch" {
		return true
	}
	return slices.Contains([]string{"attach", "exec", "log", "portforward", "proxy"}, info.Subresource)
}

// limitRequest applies the in-flight limit and the request timeout to an
// authenticated request. It returns the request to serve (its context
// bounded by the timeout) and the slot's release, or false after writing
// the refusal.
func (s *Server) limitRequest(w http.ResponseWriter, r *http.Request) (*http.Request, func(), bool) {
	info, isResource := parseResourcePath(r.Method, r.URL.Path, r.URL.Query(), s.lookup)
	if longRunning(info, isResource) {
		return r, func() {}, true
	}
	release := func() {}
	if u, ok := genericrequest.UserFrom(r.Context()); !ok || !slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup) {
		var free bool
		if release, free = s.inflight.acquire(r); !free {
			w.Header().Set("Retry-After", "1")
			writeError(w, apierrors.NewTooManyRequests("too many requests, please try again later", 1))
			return nil, nil, false
		}
	}
	if s.cfg.RequestTimeout <= 0 {
		return r, release, true
	}
	// The deadline bounds the whole request: a body sent a byte a second
	// is cut off, and storage, admission and webhooks stop with the
	// context; the response may take writeGrace more, so that the 504
	// still reaches the client and a response read as slowly is cut off
	// too.
	deadline := time.Now().Add(s.cfg.RequestTimeout)
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(deadline)
	_ = rc.SetWriteDeadline(deadline.Add(writeGrace))
	ctx, cancel := context.WithDeadline(r.Context(), deadline)
	return r.WithContext(ctx), func() { cancel(); release() }, true
}

// isTimeout reports whether err is the request's deadline passing.
func isTimeout(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded)
}

// timeoutError is upstream's answer to a request that ran out of time.
func timeoutError() error {
	return apierrors.NewTimeoutError("request did not complete within the allotted timeout", 0)
}
