package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodelet/nodelet/controlplane/registry"
	"github.com/nodelet/nodelet/controlplane/storage"
)

const (
	defaultWatchTimeout = 30 * time.Minute
	bookmarkInterval    = 30 * time.Second
)

// watchCache shares the decoding and encoding of one stored event among
// all the watch streams that deliver it, so the cost of an event does not
// grow with the number of watchers. Entries are read-only once made.
type watchCache struct {
	mu      sync.Mutex
	entries map[int64]*cachedEvent
	ring    []int64
	next    int
}

type cachedEvent struct {
	res      *registry.Resource
	ev       storage.Event
	objOnce  sync.Once
	obj      runtime.Object
	objErr   error
	prevOnce sync.Once
	prev     runtime.Object
	jsonOnce sync.Once
	json     []byte
}

func newWatchCache(size int) *watchCache {
	return &watchCache{entries: make(map[int64]*cachedEvent, size), ring: make([]int64, size)}
}

func (c *watchCache) get(res *registry.Resource, ev storage.Event) *cachedEvent {
	rev := ev.KV.ModRevision
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[rev]; ok {
		return e
	}
	e := &cachedEvent{res: res, ev: ev}
	delete(c.entries, c.ring[c.next])
	c.ring[c.next] = rev
	c.next = (c.next + 1) % len(c.ring)
	c.entries[rev] = e
	return e
}

func (e *cachedEvent) object() (runtime.Object, error) {
	e.objOnce.Do(func() { e.obj, e.objErr = decodeKV(e.res, e.ev.KV) })
	return e.obj, e.objErr
}

// previous decodes the value before the change (nil on create).
func (e *cachedEvent) previous() runtime.Object {
	e.prevOnce.Do(func() {
		if e.ev.PrevValue == nil {
			return
		}
		kv := e.ev.KV
		kv.Value = e.ev.PrevValue
		e.prev, _ = decodeKV(e.res, kv)
	})
	return e.prev
}

func (e *cachedEvent) objectJSON() []byte {
	e.jsonOnce.Do(func() {
		obj, err := e.object()
		if err == nil {
			e.json, _ = json.Marshal(obj)
		}
	})
	return e.json
}

// watchParams are the query parameters of a watch.
type watchParams struct {
	rv                int64
	fromNow           bool // resourceVersion "" or "0": send the current state first
	sendInitialEvents bool
	bookmarks         bool
	timeout           time.Duration
	output            outputKind
	includeObject     string
	match             *matcher
}

func (s *Server) parseWatch(r *http.Request, info requestInfo) (*watchParams, error) {
	q := r.URL.Query()
	p := &watchParams{timeout: defaultWatchTimeout, bookmarks: isTrue(q["allowWatchBookmarks"]), includeObject: q.Get("includeObject")}
	var err error
	if p.match, err = newMatcher(info.Resource, q); err != nil {
		return nil, err
	}
	rv := q.Get("resourceVersion")
	if p.rv, err = parseRV(rv); err != nil {
		return nil, err
	}
	p.fromNow = p.rv == 0
	if v := q.Get("sendInitialEvents"); v != "" {
		p.sendInitialEvents = v == "true"
		if p.sendInitialEvents && !p.bookmarks {
			return nil, apierrors.NewBadRequest("sendInitialEvents requires allowWatchBookmarks=true")
		}
		p.fromNow = p.sendInitialEvents
	}
	if v := q.Get("timeoutSeconds"); v != "" {
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil || secs < 0 {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid timeoutSeconds %q", v))
		}
		if secs > 0 {
			p.timeout = time.Duration(secs) * time.Second
		}
	}
	if p.output, err = negotiate(r.Header.Get("Accept")); err != nil {
		return nil, err
	}
	if p.output == outProtobuf || p.output == outYAML {
		// Watch streams are JSON; clients pick the decoder by the response type.
		p.output = outJSON
	}
	return p, nil
}

func (s *Server) serveWatch(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	p, err := s.parseWatch(r, info)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), p.timeout)
	defer cancel()
	var initial []runtime.Object
	from := p.rv
	if p.fromNow {
		q := r.URL.Query()
		q.Del("resourceVersion")
		if initial, from, err = s.listMatching(ctx, info, q); err != nil {
			return err
		}
	}
	stream := &watchStream{s: s, w: w, rc: http.NewResponseController(w), res: info.Resource, p: p, lastRV: from}
	watcher, err := s.store.Watch(ctx, listPrefix(info.Resource, info.Namespace), from)
	if errors.Is(err, storage.ErrCompacted) {
		stream.start()
		stream.writeError(apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d", from)))
		return nil
	}
	if err != nil {
		return err
	}
	defer watcher.Stop()
	stream.start()
	for _, obj := range initial {
		stream.writeObjectEvent("ADDED", obj)
	}
	if p.sendInitialEvents {
		stream.writeBookmark(true)
	}
	stream.flush()
	stream.loop(ctx, watcher)
	return nil
}

// watchStream writes one watch response.
type watchStream struct {
	s       *Server
	w       http.ResponseWriter
	rc      *http.ResponseController
	res     *registry.Resource
	p       *watchParams
	lastRV  int64
	started bool
	headers bool
	failed  bool
}

func (ws *watchStream) start() {
	ws.w.Header().Set("Content-Type", "application/json")
	ws.w.Header().Set("Transfer-Encoding", "chunked")
	ws.w.WriteHeader(http.StatusOK)
	ws.started = true
	ws.flush()
}

func (ws *watchStream) loop(ctx context.Context, watcher storage.Watcher) {
	var tick <-chan time.Time
	if ws.p.bookmarks {
		t := time.NewTicker(bookmarkInterval)
		defer t.Stop()
		tick = t.C
	}
	for !ws.failed {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			ws.writeBookmark(false)
			ws.flush()
		case ev, ok := <-watcher.Events():
			if !ok {
				return // cut off or closed; the client resumes from lastRV
			}
			ws.deliver(ev)
			// Flush once the burst is drained, not per event.
			if len(watcher.Events()) == 0 {
				ws.flush()
			}
		}
	}
}

// deliver turns one storage event into the watch event this stream's
// selectors call for, if any.
func (ws *watchStream) deliver(ev storage.Event) {
	ce := ws.s.watches.get(ws.res, ev)
	obj, err := ce.object()
	if err != nil {
		ws.s.log.Error("decode watch event", "key", ev.KV.Key, "err", err)
		return
	}
	ws.lastRV = ev.KV.ModRevision
	m := ws.p.match
	cur := m.matches(obj)
	typ := ""
	switch {
	case ev.Type == storage.Delete:
		if cur {
			typ = "DELETED"
		}
	case ev.PrevValue == nil:
		if cur {
			typ = "ADDED"
		}
	case m.everything():
		typ = "MODIFIED"
	default:
		prev := ce.previous()
		was := prev != nil && m.matches(prev)
		switch {
		case cur && was:
			typ = "MODIFIED"
		case cur:
			typ = "ADDED"
		case was:
			typ = "DELETED"
		}
	}
	if typ == "" {
		return
	}
	if ws.p.output == outJSON {
		ws.writeFrame(typ, ce.objectJSON())
		return
	}
	ws.writeObjectEvent(typ, obj)
}

func (ws *watchStream) writeObjectEvent(typ string, obj runtime.Object) {
	var v any = obj
	var err error
	switch ws.p.output {
	case outTable:
		v, err = ws.s.toTable(ws.res, obj, ws.p.includeObject, !ws.headers)
		ws.headers = true
	case outMetadata:
		v = partialMetadata(obj)
	default:
		setTypeMeta(ws.res, obj)
	}
	if err != nil {
		ws.s.log.Error("render watch event", "err", err)
		return
	}
	data, err := json.Marshal(v)
	if err != nil {
		ws.s.log.Error("encode watch event", "err", err)
		return
	}
	ws.writeFrame(typ, data)
}

func (ws *watchStream) writeBookmark(initialEnd bool) {
	obj := ws.res.New()
	setTypeMeta(ws.res, obj)
	m := accessor(obj)
	m.SetResourceVersion(strconv.FormatInt(ws.lastRV, 10))
	if initialEnd {
		m.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
	}
	data, _ := json.Marshal(obj)
	ws.writeFrame("BOOKMARK", data)
}

func (ws *watchStream) writeError(err *apierrors.StatusError) {
	st := err.Status()
	st.Kind, st.APIVersion = "Status", "v1"
	data, _ := json.Marshal(st)
	ws.writeFrame("ERROR", data)
	ws.flush()
}

func (ws *watchStream) writeFrame(typ string, obj []byte) {
	if ws.failed || obj == nil {
		return
	}
	buf := make([]byte, 0, len(obj)+32)
	buf = append(buf, `{"type":"`...)
	buf = append(buf, typ...)
	buf = append(buf, `","object":`...)
	buf = append(buf, obj...)
	buf = append(buf, "}\n"...)
	if _, err := ws.w.Write(buf); err != nil {
		ws.failed = true
	}
}

func (ws *watchStream) flush() {
	if err := ws.rc.Flush(); err != nil {
		ws.failed = true
	}
}
