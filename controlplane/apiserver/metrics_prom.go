package apiserver

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// RequestMetrics is the API server's Prometheus instrumentation, named as
// upstream's so dashboards and alerts written for kube-apiserver work:
// apiserver_request_total and apiserver_request_duration_seconds. It also
// serves GET /metrics from the registry it was built with (the control
// plane's own, not the process-global default).
type RequestMetrics struct {
	total    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	handler  http.Handler
	// Resolved children by label set: WithLabelValues hashes the values
	// and allocates its variadic slice on every call; a read-locked map
	// keyed by a comparable struct does neither (a sync.Map would box the
	// key) once the set has been seen.
	mu        sync.RWMutex
	counters  map[requestLabels]prometheus.Counter
	observers map[requestLabels]prometheus.Observer // code 0
}

// Upstream's apiserver_request_duration_seconds buckets.
var requestDurationBuckets = []float64{0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3,
	4, 5, 6, 8, 10, 15, 20, 30, 45, 60}

// NewRequestMetrics registers the request metrics in reg and serves reg
// (so everything else registered there appears on /metrics too), followed
// by what the extra gatherers gather (their families' names must not
// repeat reg's).
func NewRequestMetrics(reg *prometheus.Registry, extra ...prometheus.Gatherer) (*RequestMetrics, error) {
	m := &RequestMetrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_request_total",
			Help: "Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.",
		}, []string{"verb", "group", "version", "resource", "subresource", "scope", "component", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_request_duration_seconds",
			Help:    "Response latency distribution in seconds for each verb, group, version, resource, subresource, scope and component.",
			Buckets: requestDurationBuckets,
		}, []string{"verb", "group", "version", "resource", "subresource", "scope", "component"}),
		handler:   promhttp.HandlerFor(append(prometheus.Gatherers{reg}, extra...), promhttp.HandlerOpts{Registry: reg}),
		counters:  map[requestLabels]prometheus.Counter{},
		observers: map[requestLabels]prometheus.Observer{},
	}
	for _, c := range []prometheus.Collector{m.total, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register apiserver metrics: %w", err)
		}
	}
	return m, nil
}

// requestLabels is one label set; code is 0 for the histogram.
type requestLabels struct {
	verb, group, version, resource, subresource, scope string
	code                                               int
}

// wrap measures every request next serves. The labels are filled in by
// serve once the request is parsed (noteRequest); requests that never get
// that far (401, non-resource paths) count under the HTTP method alone.
func (m *RequestMetrics) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rw := &recordingWriter{ResponseWriter: w}
		rw.labels.verb = r.Method
		defer func() {
			// Recorded even when next panics (http.ErrAbortHandler is
			// re-raised by the recover handler): the client saw a failure.
			m.observe(rw, time.Since(start))
		}()
		next.ServeHTTP(rw, r)
	})
}

func (m *RequestMetrics) observe(rw *recordingWriter, d time.Duration) {
	l := rw.labels
	l.code = rw.code
	if l.code == 0 {
		l.code = http.StatusOK
	}
	m.counter(l).Inc()
	// Long-running requests last as long as the client wants: upstream
	// leaves them out of the latency histogram.
	if l.verb == "WATCH" || l.verb == "CONNECT" {
		return
	}
	l.code = 0
	m.observer(l).Observe(d.Seconds())
}

func (m *RequestMetrics) counter(l requestLabels) prometheus.Counter {
	m.mu.RLock()
	c, ok := m.counters[l]
	m.mu.RUnlock()
	if ok {
		return c
	}
	c = m.total.WithLabelValues(l.verb, l.group, l.version, l.resource, l.subresource, l.scope,
		"apiserver", strconv.Itoa(l.code))
	m.mu.Lock()
	m.counters[l] = c
	m.mu.Unlock()
	return c
}

func (m *RequestMetrics) observer(l requestLabels) prometheus.Observer {
	m.mu.RLock()
	o, ok := m.observers[l]
	m.mu.RUnlock()
	if ok {
		return o
	}
	o = m.duration.WithLabelValues(l.verb, l.group, l.version, l.resource, l.subresource, l.scope, "apiserver")
	m.mu.Lock()
	m.observers[l] = o
	m.mu.Unlock()
	return o
}

// noteRequest gives the request's metric labels once serve has parsed it.
// w is the recordingWriter when metrics are on; otherwise nothing happens.
func noteRequest(w http.ResponseWriter, r *http.Request, info requestInfo) {
	rw, ok := w.(*recordingWriter)
	if !ok {
		return
	}
	scope := "cluster"
	switch {
	case info.Name != "":
		scope = "resource"
	case info.Namespace != "":
		scope = "namespace"
	}
	rw.labels = requestLabels{verb: metricVerb(r, info), group: info.GV.Group, version: info.GV.Version,
		resource: info.ResourceArg, subresource: info.Subresource, scope: scope}
}

// metricVerb is upstream's verb label: the HTTP-ish verb in capitals,
// LIST/WATCH split from GET, APPLY for server-side apply and CONNECT for
// the streaming subresources.
func metricVerb(r *http.Request, info requestInfo) string {
	switch info.Subresource {
	case "exec", "attach", "portforward", "proxy":
		return "CONNECT"
	}
	switch info.Verb {
	case "get":
		return "GET"
	case "list":
		return "LIST"
	case "watch":
		return "WATCH"
	case "create":
		return "POST"
	case "update":
		return "PUT"
	case "patch":
		if strings.HasPrefix(r.Header.Get("Content-Type"), "application/apply-patch") {
			return "APPLY"
		}
		return "PATCH"
	case "delete":
		return "DELETE"
	case "deletecollection":
		return "DELETECOLLECTION"
	}
	return r.Method
}

// recordingWriter captures the status code. It passes Flush and Hijack
// through (watches flush; exec and port-forward upgrade the connection)
// and Unwrap serves http.ResponseController.
type recordingWriter struct {
	http.ResponseWriter
	code   int
	labels requestLabels
}

func (w *recordingWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recordingWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *recordingWriter) Flush() {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *recordingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, fmt.Errorf("hijack: %T does not support it", w.ResponseWriter)
	}
	if w.code == 0 {
		w.code = http.StatusSwitchingProtocols
	}
	return h.Hijack()
}

func (w *recordingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
