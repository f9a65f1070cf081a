package apiserver

import (
	"bufio"
	"bytes"
	"context"
	stdjson "encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/audit/policy"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	auditlog "k8s.io/apiserver/plugin/pkg/audit/log"

	"github.com/nodelet/nodelet/controlplane/registry"
)

// maxAuditedBody bounds the request and response bodies an audit event
// carries at levels Request and RequestResponse.
const maxAuditedBody = 1 << 20

// Auditor writes the audit log as kube-apiserver does with
// --audit-policy-file and --audit-log-path: upstream's policy evaluation
// and audit context (which admission plugins annotate), and upstream's log
// backend writing audit.k8s.io/v1 events as JSON lines. Every request
// after authentication gets a RequestReceived and a ResponseComplete
// stage unless the policy omits them; at level Request the event carries
// the request body as sent (JSON), at RequestResponse the response body
// too.
type Auditor struct {
	policy  audit.PolicyRuleEvaluator
	backend audit.Backend
	// objects encodes a create's object for upstream's LogRequestObject,
	// which fills the event's objectRef from it: as sent, no conversion
	// (kinds it does not know are encoded as they are).
	objects runtime.NegotiatedSerializer
}

// NewAuditor reads the policy file (audit.k8s.io/v1 Policy) and writes
// events to out.
func NewAuditor(policyFile string, out io.Writer) (*Auditor, error) {
	p, err := policy.LoadPolicyFromFile(policyFile)
	if err != nil {
		return nil, fmt.Errorf("audit policy %s: %w", policyFile, err)
	}
	backend := auditlog.NewBackend(out, auditlog.FormatJson, auditv1.SchemeGroupVersion)
	if err := backend.Run(make(chan struct{})); err != nil {
		return nil, err
	}
	return &Auditor{policy: policy.NewPolicyRuleEvaluator(p), backend: backend,
		objects: serializer.WithoutConversionCodecFactory{CodecFactory: serializer.NewCodecFactory(runtime.NewScheme())}}, nil
}

// auditStart gives r an audit context and its Audit-ID (the request's, or
// a new one, also sent back as upstream's filter does), evaluates the
// policy for u (nil: before authentication) and, unless the policy says
// None, records the request's metadata: ok then.
func (s *Server) auditStart(w http.ResponseWriter, r *http.Request, u user.Info) (context.Context, *audit.AuditContext, auditedRequest, bool) {
	a := s.cfg.Audit
	ctx := audit.WithAuditContext(r.Context())
	ac := audit.AuditContextFrom(ctx)
	id := r.Header.Get(auditinternal.HeaderAuditID)
	if id == "" {
		id = string(uuid.NewUUID())
	}
	audit.WithAuditID(ctx, types.UID(id))
	w.Header().Set(auditinternal.HeaderAuditID, id)
	attrs, _, _ := s.requestAttributes(r, u)
	rac := a.policy.EvaluatePolicyRule(attrs)
	req := auditedRequest{attrs: attrs, level: rac.Level}
	if err := ac.Init(rac, a.backend); err != nil || rac.Level == auditinternal.LevelNone {
		return ctx, ac, req, false
	}
	audit.LogRequestMetadata(ctx, r.WithContext(ctx), time.Now(), attrs)
	return ctx, ac, req, true
}

// auditedRequest is what the policy made of a request.
type auditedRequest struct {
	attrs authorizer.Attributes
	level auditinternal.Level
}

// begin starts auditing r, authenticated as authn and, when impersonating,
// acting as acting. It returns the writer and request to serve and the
// function that ends the event once the response is complete.
func (s *Server) auditBegin(w http.ResponseWriter, r *http.Request, authn, acting user.Info) (http.ResponseWriter, *http.Request, func()) {
	ctx, ac, req, ok := s.auditStart(w, r, authn)
	r = r.WithContext(ctx)
	if !ok {
		return w, r, func() {}
	}
	if acting != nil {
		ac.LogImpersonatedUser(acting, "")
	}
	ac.ProcessEventStage(ctx, auditinternal.StageRequestReceived)

	var body *bytes.Buffer
	if !req.level.Less(auditinternal.LevelRequest) && r.Body != nil && r.Body != http.NoBody {
		body = &bytes.Buffer{}
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.TeeReader(r.Body, &limitedWriter{buf: body, max: maxAuditedBody}), r.Body}
	}
	aw := &auditWriter{ResponseWriter: w, code: http.StatusOK, ctx: ctx, ac: ac, long: auditLongRunning(req.attrs)}
	if !req.level.Less(auditinternal.LevelRequestResponse) {
		aw.body = &limitedWriter{buf: &bytes.Buffer{}, max: maxAuditedBody}
	}
	return aw, r, func() {
		if body != nil {
			if raw := s.auditJSON(r.Header.Get("Content-Type"), body.Bytes()); raw != nil {
				ac.LogRequestPatch(raw)
			}
		}
		ac.SetEventResponseStatusCode(int32(aw.code))
		if aw.body != nil {
			if raw := s.auditJSON(aw.Header().Get("Content-Type"), aw.body.buf.Bytes()); raw != nil {
				ac.LogResponseObject(nil, &runtime.Unknown{Raw: raw, ContentType: runtime.ContentTypeJSON})
			}
		}
		ac.ProcessEventStage(ctx, auditinternal.StageResponseComplete)
	}
}

// auditCreate completes a create's objectRef (its name, which the URL
// does not hold) from the decoded object, as upstream's create handler
// does.
func (s *Server) auditCreate(ctx context.Context, res *registry.Resource, obj runtime.Object) {
	if s.cfg.Audit == nil {
		return
	}
	audit.LogRequestObject(ctx, obj, res.GroupVersion, res.GroupVersionResource(), "", s.cfg.Audit.objects)
}

// auditUnauthenticated records a request refused before anyone is known
// (401), as upstream's failed-authentication audit does: the policy sees
// no user, the event's stage is ResponseStarted and its status says which
// credentials were tried.
func (s *Server) auditUnauthenticated(w http.ResponseWriter, r *http.Request) {
	ctx, ac, _, ok := s.auditStart(w, r, nil)
	if !ok {
		return
	}
	ac.SetEventResponseStatus(&metav1.Status{Message: "Authentication failed, attempted: " + attemptedAuth(r), Code: http.StatusUnauthorized})
	ac.ProcessEventStage(ctx, auditinternal.StageResponseStarted)
}

// attemptedAuth names the credentials a request carried, upstream's way.
func attemptedAuth(r *http.Request) string {
	var methods []string
	if _, _, ok := r.BasicAuth(); ok {
		methods = append(methods, "basic")
	}
	if scheme, _, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " "); strings.EqualFold(scheme, "bearer") {
		methods = append(methods, "bearer")
	}
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		methods = append(methods, "x509")
	}
	if len(methods) == 0 {
		return "none"
	}
	return strings.Join(methods, ", ")
}

// auditJSON is a body as an event embeds it: JSON as sent, protobuf
// decoded and written as JSON (client-go sends built-in kinds as
// protobuf); nil for what is neither, empty or cut at maxAuditedBody.
func (s *Server) auditJSON(contentType string, body []byte) []byte {
	if len(body) == 0 || len(body) >= maxAuditedBody {
		return nil
	}
	if isJSONType(contentType) {
		return body
	}
	if !strings.HasPrefix(contentType, "application/vnd.kubernetes.protobuf") {
		return nil
	}
	obj, _, err := s.protobuf.Decode(body, nil, nil)
	if err != nil {
		return nil
	}
	raw, err := stdjson.Marshal(obj)
	if err != nil {
		return nil
	}
	return raw
}

// isJSONType reports whether a content type is JSON (what an event can embed).
func isJSONType(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	switch strings.TrimSpace(mt) {
	case "", "application/json", "application/merge-patch+json", "application/json-patch+json", "application/strategic-merge-patch+json":
		return true
	}
	return false
}

// limitedWriter keeps the first max bytes written to it.
type limitedWriter struct {
	buf *bytes.Buffer
	max int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if room := l.max - l.buf.Len(); room > 0 {
		l.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// auditLongRunning: upstream's long-running requests (watches, proxies,
// attach, exec, logs and port-forwards) also get a ResponseStarted event
// when their response begins.
func auditLongRunning(attrs authorizer.Attributes) bool {
	if !attrs.IsResourceRequest() {
		return false
	}
	switch attrs.GetVerb() {
	case "watch", "proxy":
		return true
	}
	switch attrs.GetSubresource() {
	case "attach", "exec", "proxy", "log", "portforward":
		return true
	}
	return false
}

// auditWriter records the response's status code (and body, when set)
// and passes flushing, hijacking and the response controller through, so
// watches and upgrades work audited. For a long-running request the start
// of the response is an event of its own (ResponseStarted).
type auditWriter struct {
	http.ResponseWriter
	code    int
	started bool
	body    *limitedWriter
	ctx     context.Context
	ac      *audit.AuditContext
	long    bool
}

// start records the response's code once, and for a long-running request
// sends the ResponseStarted event.
func (w *auditWriter) start(code int) {
	if w.started {
		return
	}
	w.code, w.started = code, true
	if w.long {
		w.ac.SetEventResponseStatusCode(int32(code))
		w.ac.ProcessEventStage(w.ctx, auditinternal.StageResponseStarted)
	}
}

func (w *auditWriter) WriteHeader(code int) {
	w.start(code)
	w.ResponseWriter.WriteHeader(code)
}

func (w *auditWriter) Write(p []byte) (int, error) {
	w.start(http.StatusOK)
	if w.body != nil {
		w.body.Write(p)
	}
	return w.ResponseWriter.Write(p)
}

func (w *auditWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *auditWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, fmt.Errorf("the response writer cannot be hijacked")
	}
	w.start(http.StatusSwitchingProtocols)
	return h.Hijack()
}

func (w *auditWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
