package apiserver

import (
	"bufio"
	"bytes"
	stdjson "encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/audit/policy"
	"k8s.io/apiserver/pkg/authentication/user"
	auditlog "k8s.io/apiserver/plugin/pkg/audit/log"
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
	return &Auditor{policy: policy.NewPolicyRuleEvaluator(p), backend: backend}, nil
}

// begin starts auditing r, authenticated as authn and, when impersonating,
// acting as acting. It returns the writer and request to serve and the
// function that ends the event once the response is complete.
func (s *Server) auditBegin(w http.ResponseWriter, r *http.Request, authn, acting user.Info) (http.ResponseWriter, *http.Request, func()) {
	a := s.cfg.Audit
	ctx := audit.WithAuditContext(r.Context())
	ac := audit.AuditContextFrom(ctx)
	// The request's Audit-ID, or a new one, also sent back as upstream's
	// filter does.
	id := r.Header.Get(auditinternal.HeaderAuditID)
	if id == "" {
		id = string(uuid.NewUUID())
	}
	audit.WithAuditID(ctx, types.UID(id))
	w.Header().Set(auditinternal.HeaderAuditID, id)
	attrs, _, _ := s.requestAttributes(r, authn)
	rac := a.policy.EvaluatePolicyRule(attrs)
	if err := ac.Init(rac, a.backend); err != nil || rac.Level == auditinternal.LevelNone {
		return w, r.WithContext(ctx), func() {}
	}
	r = r.WithContext(ctx)
	audit.LogRequestMetadata(ctx, r, time.Now(), attrs)
	if acting != nil {
		ac.LogImpersonatedUser(acting, "")
	}
	ac.ProcessEventStage(ctx, auditinternal.StageRequestReceived)

	var body *bytes.Buffer
	if !rac.Level.Less(auditinternal.LevelRequest) && r.Body != nil && r.Body != http.NoBody {
		body = &bytes.Buffer{}
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.TeeReader(r.Body, &limitedWriter{buf: body, max: maxAuditedBody}), r.Body}
	}
	aw := &auditWriter{ResponseWriter: w, code: http.StatusOK}
	if !rac.Level.Less(auditinternal.LevelRequestResponse) {
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

// auditWriter records the response's status code (and body, when set)
// and passes flushing, hijacking and the response controller through, so
// watches and upgrades work audited.
type auditWriter struct {
	http.ResponseWriter
	code    int
	started bool
	body    *limitedWriter
}

func (w *auditWriter) WriteHeader(code int) {
	if !w.started {
		w.code, w.started = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *auditWriter) Write(p []byte) (int, error) {
	w.started = true
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
	w.code, w.started = http.StatusSwitchingProtocols, true
	return h.Hijack()
}

func (w *auditWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
