package apiserver

import (
	"bytes"
	"context"
	"encoding/binary"
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
// grow with the number of watchers. Entries are read-only once made, and
// kept per served resource: the same stored event reads differently in
// each version or group a resource is served in.
//
// The cache is bounded by count (the ring) and by bytes: an entry is
// charged watchCacheFactor times its stored value and previous value
// (the decoded objects and their JSON and protobuf encodings are of that
// order), and the oldest entries go while the charge is over maxBytes.
type watchCache struct {
	mu       sync.Mutex
	entries  map[eventKey]*cachedEvent
	ring     []eventKey
	next     int
	bytes    int64
	maxBytes int64
}

const (
	watchCacheBytes  = 128 << 20
	watchCacheFactor = 4
)

// charge is what an entry for ev counts against maxBytes.
func (e *cachedEvent) charge() int64 {
	return watchCacheFactor * int64(len(e.ev.KV.Value)+len(e.ev.PrevValue))
}

type eventKey struct {
	rev int64
	res *registry.Resource
}

type cachedEvent struct {
	codec     objectCodec
	res       *registry.Resource
	ev        storage.Event
	objOnce   sync.Once
	obj       runtime.Object
	objErr    error
	prevOnce  sync.Once
	prev      runtime.Object
	jsonOnce  sync.Once
	json      []byte
	protoOnce sync.Once
	proto     []byte
}

func newWatchCache(size int) *watchCache {
	return &watchCache{entries: make(map[eventKey]*cachedEvent, size), ring: make([]eventKey, size), maxBytes: watchCacheBytes}
}

func (c *watchCache) get(codec objectCodec, res *registry.Resource, ev storage.Event) *cachedEvent {
	key := eventKey{rev: ev.KV.ModRevision, res: res}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		return e
	}
	e := &cachedEvent{codec: codec, res: res, ev: ev}
	c.evict(c.next)
	c.ring[c.next] = key
	c.next = (c.next + 1) % len(c.ring)
	c.entries[key] = e
	c.bytes += e.charge()
	// Oldest first: the slots after next, up to the one just filled.
	for i := c.next; c.bytes > c.maxBytes && i != (c.next+len(c.ring)-1)%len(c.ring); i = (i + 1) % len(c.ring) {
		c.evict(i)
	}
	return e
}

// evict drops the entry in ring slot i, if any; c.mu held.
func (c *watchCache) evict(i int) {
	if old, ok := c.entries[c.ring[i]]; ok {
		c.bytes -= old.charge()
		delete(c.entries, c.ring[i])
	}
	c.ring[i] = eventKey{}
}

func (e *cachedEvent) object() (runtime.Object, error) {
	e.objOnce.Do(func() { e.obj, e.objErr = e.codec.decode(e.res, e.ev.KV) })
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
		e.prev, _ = e.codec.decode(e.res, kv)
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

// objectProto is the object in the Kubernetes protobuf envelope, encoded
// once for every protobuf watcher.
func (e *cachedEvent) objectProto(enc runtime.Encoder) []byte {
	e.protoOnce.Do(func() {
		obj, err := e.object()
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if enc.Encode(obj, &buf) == nil {
			e.proto = buf.Bytes()
		}
	})
	return e.proto
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
	if p.output, err = negotiate(r.Header.Get("Accept"), isUnstructured(info.Resource)); err != nil {
		return nil, err
	}
	if p.output == outYAML {
		// YAML watch streams are not served; clients pick the decoder by
		// the response type, and every client accepts JSON.
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
	ct := "application/json"
	if ws.p.output == outProtobuf {
		ct = protobufType + ";stream=watch"
	}
	ws.w.Header().Set("Content-Type", ct)
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
	// A watch of a resource that stops being served as it was (its CRD
	// changed or went) ends, as upstream ends the watches of a CRD's old
	// storage: the client watches again from its last resourceVersion.
	snap := ws.s.table.snapshot()
	for !ws.failed {
		if snap.lookup(ws.res.GroupVersion, ws.res.Name) != ws.res {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-snap.replaced:
			snap = ws.s.table.snapshot()
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
	ce := ws.s.watches.get(ws.s.codec, ws.res, ev)
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
	switch ws.p.output {
	case outJSON:
		ws.writeFrame(typ, ce.objectJSON())
	case outProtobuf:
		ws.writeFrame(typ, ce.objectProto(ws.s.protobuf))
	default:
		ws.writeObjectEvent(typ, obj)
	}
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
	case outProtobuf:
		setTypeMeta(ws.res, obj)
		ws.writeFrame(typ, ws.encodeProto(obj))
		return
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
	var v any = obj
	switch ws.p.output {
	case outProtobuf:
		ws.writeFrame("BOOKMARK", ws.encodeProto(obj))
		return
	case outMetadata:
		// A metadata client decodes nothing but meta.k8s.io kinds: a
		// bookmark of the resource's own kind would end its watch.
		v = partialMetadata(obj)
	}
	data, _ := json.Marshal(v)
	ws.writeFrame("BOOKMARK", data)
}

func (ws *watchStream) encodeProto(obj runtime.Object) []byte {
	var buf bytes.Buffer
	if err := ws.s.protobuf.Encode(obj, &buf); err != nil {
		ws.s.log.Error("encode watch event", "err", err)
		return nil
	}
	return buf.Bytes()
}

func (ws *watchStream) writeError(err *apierrors.StatusError) {
	st := err.Status()
	st.Kind, st.APIVersion = "Status", "v1"
	if ws.p.output == outProtobuf {
		ws.writeFrame("ERROR", ws.encodeProto(&st))
	} else {
		data, _ := json.Marshal(st)
		ws.writeFrame("ERROR", data)
	}
	ws.flush()
}

// writeFrame writes one event: a JSON line, or for protobuf a
// length-prefixed metav1.WatchEvent whose object holds the envelope bytes.
func (ws *watchStream) writeFrame(typ string, obj []byte) {
	if ws.failed || obj == nil {
		return
	}
	if ws.p.output == outProtobuf {
		ev := metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: obj}}
		data, err := ev.Marshal()
		if err != nil {
			ws.s.log.Error("encode watch event", "err", err)
			return
		}
		frame := make([]byte, 4, 4+len(data))
		binary.BigEndian.PutUint32(frame, uint32(len(data)))
		if _, err := ws.w.Write(append(frame, data...)); err != nil {
			ws.failed = true
		}
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
