package nodeapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	crilogs "k8s.io/cri-client/pkg/logs"

	"github.com/nodelet/nodelet/runtime"
)

// serveLogs streams a container's CRI log file as upstream's
// /containerLogs: follow, tailLines, sinceSeconds, sinceTime, timestamps,
// previous and limitBytes.
func (s *Server) serveLogs(w http.ResponseWriter, r *http.Request) {
	opts, previous, err := logOptions(r)
	if err != nil {
		writeStatus(w, err)
		return
	}
	t, err := s.lookup(r.Context(), r, true)
	if err != nil {
		writeStatus(w, err)
		return
	}
	path, id, err := s.logFile(t, previous)
	if err != nil {
		writeStatus(w, err)
		return
	}
	if !fileExists(path) {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("the log of container %q in pod %q is gone (%s)", t.container, t.pod.Name, path)))
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	var out io.Writer = w
	if f, ok := w.(http.Flusher); ok && opts.Follow {
		fw := &flushWriter{w: w, f: f}
		defer fw.stop()
		out = fw
	}
	running := containerRunning{rt: s.cfg.Runtime, uid: t.pod.UID}
	if err := crilogs.ReadLogs(r.Context(), path, id, opts, running, out, out); err != nil && r.Context().Err() == nil {
		s.log.Info("read logs", "pod", t.pod.Namespace+"/"+t.pod.Name, "container", t.container, "err", err)
	}
}

// logFile picks the log of the container's newest instance, or with
// previous of the one before. The file of an instance already removed
// from the runtime is still found by its path.
func (s *Server) logFile(t *podTarget, previous bool) (path, id string, err error) {
	latest, prev := t.instances()
	if latest == nil {
		// A finished pod's containers are gone from the runtime; their
		// logs stay until the pod is deleted.
		if st := t.apiStatus(); st != nil && st.State.Terminated != nil && s.cfg.LogRoot != "" {
			attempt := uint32(st.RestartCount)
			if previous {
				attempt--
			}
			p := runtime.ContainerLogPath(s.cfg.LogRoot, t.pod.Namespace, t.pod.Name, string(t.pod.UID), t.container, attempt)
			if (!previous || st.RestartCount > 0) && fileExists(p) {
				return p, "", nil
			}
		}
		return "", "", apierrors.NewBadRequest(fmt.Sprintf("container %q in pod %q is waiting to start: ContainerCreating", t.container, t.pod.Name))
	}
	if !previous {
		return latest.LogPath, latest.ID, nil
	}
	// As upstream, "previous" is the instance the API shows as the last
	// terminated one: the newest itself while it waits to be restarted.
	if st := t.apiStatus(); st != nil && st.LastTerminationState.Terminated != nil {
		id := st.LastTerminationState.Terminated.ContainerID
		for _, c := range []*runtime.ContainerStatus{latest, prev} {
			if c != nil && c.LogPath != "" && strings.HasSuffix(id, "://"+c.ID) {
				return c.LogPath, c.ID, nil
			}
		}
	}
	if prev != nil && prev.LogPath != "" {
		return prev.LogPath, prev.ID, nil
	}
	if latest.Attempt > 0 && s.cfg.LogRoot != "" {
		p := runtime.ContainerLogPath(s.cfg.LogRoot, t.pod.Namespace, t.pod.Name, string(t.pod.UID), t.container, latest.Attempt-1)
		if fileExists(p) {
			return p, "", nil
		}
	}
	return "", "", apierrors.NewBadRequest(fmt.Sprintf("previous terminated container %q in pod %q not found", t.container, t.pod.Name))
}

// logOptions reads upstream's query parameters.
func logOptions(r *http.Request) (*crilogs.LogOptions, bool, error) {
	q := r.URL.Query()
	opts := &crilogs.LogOptions{}
	bad := func(name string) error {
		return apierrors.NewBadRequest(fmt.Sprintf("invalid %s %q", name, q.Get(name)))
	}
	var previous bool
	for name, dst := range map[string]*bool{"follow": &opts.Follow, "timestamps": &opts.Timestamp, "previous": &previous} {
		if v := q.Get(name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, false, bad(name)
			}
			*dst = b
		}
	}
	for name, dst := range map[string]**int64{"tailLines": &opts.TailLines, "limitBytes": &opts.LimitBytes} {
		if v := q.Get(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 || (name == "limitBytes" && n < 1) {
				return nil, false, bad(name)
			}
			*dst = &n
		}
	}
	if v := q.Get("sinceSeconds"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return nil, false, bad("sinceSeconds")
		}
		opts.Since = time.Now().Add(-time.Duration(n) * time.Second)
	}
	if v := q.Get("sinceTime"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return nil, false, bad("sinceTime")
		}
		opts.Since = t
	}
	if previous {
		opts.Follow = false // a terminated instance has nothing more to say
	}
	return opts, previous, nil
}

// followFlushDelay bounds how long a followed line may wait in the
// response's buffer: the log reader writes a line at a time, and a flush
// per line would cost a write per line.
const followFlushDelay = 50 * time.Millisecond

// flushWriter flushes what was written at most followFlushDelay later, so
// that followed lines arrive at once and bursts go out together.
type flushWriter struct {
	mu      sync.Mutex
	w       io.Writer
	f       http.Flusher
	pending *time.Timer
	stopped bool
}

func (f *flushWriter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.w.Write(p)
	if f.pending == nil && !f.stopped {
		f.pending = time.AfterFunc(followFlushDelay, f.flush)
	}
	return n, err
}

func (f *flushWriter) flush() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pending = nil
	if !f.stopped {
		f.f.Flush()
	}
}

// stop flushes what is left; the writer is not used afterwards.
func (f *flushWriter) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pending != nil {
		f.pending.Stop()
		f.pending = nil
	}
	if !f.stopped {
		f.f.Flush()
	}
	f.stopped = true
}

// containerRunning answers the one question the CRI log reader asks while
// following a log: is the container still running? Only ContainerStatus
// is implemented; the reader calls nothing else.
type containerRunning struct {
	internalapi.RuntimeService
	rt  Runtime
	uid types.UID
}

func (c containerRunning) ContainerStatus(ctx context.Context, id string, _ bool) (*runtimeapi.ContainerStatusResponse, error) {
	st, err := c.rt.PodStatus(ctx, c.uid)
	if err != nil {
		return nil, err
	}
	state := runtimeapi.ContainerState_CONTAINER_EXITED
	for _, ctr := range st.Containers {
		if ctr.ID == id && ctr.State == runtime.StateRunning {
			state = runtimeapi.ContainerState_CONTAINER_RUNNING
		}
	}
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: id, State: state}}, nil
}
