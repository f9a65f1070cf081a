package apiserver

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/nodelet/nodelet/controlplane/registry"
)

// Admission is one step of admission: the RBAC escalation check
// (authorization.EscalationCheck) or the chain of admission plugins
// (admissionplugins.Chain: upstream's plugins), called with
// k8s.io/apiserver's Attributes holding the server's v1 objects, as
// kube-apiserver's handlers call theirs: Admit (mutating, may change the
// object in place) after defaulting and before the resource's Prepare and
// validation; Validate (may only refuse) after validation, just before
// the write. A delete passes both with no object and the current one as
// the old object, as upstream's deleteValidation does.
type Admission interface {
	Admit(ctx context.Context, a admission.Attributes) error
	Validate(ctx context.Context, a admission.Attributes) error
}

// admissionRequest is one write as admission sees it.
type admissionRequest struct {
	res *registry.Resource
	// sub is the subresource; kind, when set, the subresource's kind
	// (TokenRequest, Eviction) instead of the resource's.
	sub      string
	kind     schema.GroupVersionKind
	op       admission.Operation
	ns, name string
	obj, old runtime.Object
	// opts are the request's CreateOptions, UpdateOptions or DeleteOptions.
	opts   runtime.Object
	dryRun bool
}

// attributes describes the write for the admission steps. ok is false
// for the server's own writes (start-up defaults, a binding's raw
// update), which carry no user and are not admitted, as upstream's
// internal writes go straight to storage.
func (r admissionRequest) attributes(ctx context.Context) (admission.Attributes, bool) {
	u, ok := request.UserFrom(ctx)
	if !ok || r.sub == subRaw {
		return nil, false
	}
	kind := r.kind
	if kind.Empty() {
		kind = r.res.GroupVersionKind()
	}
	return admission.NewAttributesRecord(r.obj, r.old, kind, r.ns, r.name,
		r.res.GroupVersionResource(), r.sub, r.op, r.opts, r.dryRun, u), true
}

// writeRequest is the admission request of a create or update of obj
// (old is nil on create).
func writeRequest(res *registry.Resource, sub string, op admission.Operation, obj, old runtime.Object, dryRun bool) admissionRequest {
	m := accessor(obj)
	return admissionRequest{res: res, sub: sub, op: op, ns: m.GetNamespace(), name: m.GetName(), obj: obj, old: old, dryRun: dryRun}
}

// admit runs the mutating steps of every Admission in order.
func (s *Server) admit(ctx context.Context, r admissionRequest) error {
	return s.runAdmission(ctx, r, Admission.Admit)
}

// validateAdmission runs the validating steps of every Admission in order.
func (s *Server) validateAdmission(ctx context.Context, r admissionRequest) error {
	return s.runAdmission(ctx, r, Admission.Validate)
}

// runAdmission calls phase on every Admission in order with r's
// attributes; requests without a user (the server's own writes) pass.
func (s *Server) runAdmission(ctx context.Context, r admissionRequest,
	phase func(Admission, context.Context, admission.Attributes) error) error {
	if len(s.cfg.Admission) == 0 {
		return nil
	}
	a, ok := r.attributes(ctx)
	if !ok {
		return nil
	}
	for _, adm := range s.cfg.Admission {
		if err := phase(adm, ctx, a); err != nil {
			return err
		}
	}
	return nil
}

// admitAll runs both phases, for requests whose object admission may not
// change (deletes, evictions, token requests).
func (s *Server) admitAll(ctx context.Context, r admissionRequest) error {
	if err := s.admit(ctx, r); err != nil {
		return err
	}
	return s.validateAdmission(ctx, r)
}
