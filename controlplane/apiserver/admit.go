package apiserver

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/nodelet/nodelet/controlplane/registry"
)

// Admission is one step of admission: the RBAC escalation check
// (authorization.EscalationCheck) or the chain of admission plugins
// (admissionplugins.Chain: upstream's plugins), called with k8s.io/apiserver's Attributes holding
// the server's v1 objects, as kube-apiserver's handlers call theirs:
// Admit (mutating, may change the object in place) after defaulting and
// before the resource's Prepare and validation; Validate (may only
// refuse) after validation, just before the write.
type Admission interface {
	Admit(ctx context.Context, a admission.Attributes) error
	Validate(ctx context.Context, a admission.Attributes) error
}

// attributes describes one write for the admission chain. ok is false
// for the server's own writes (start-up defaults, a binding's raw
// update), which carry no user and are not admitted, as upstream's
// internal writes go straight to storage.
func attributes(ctx context.Context, res *registry.Resource, sub string, op admission.Operation,
	obj, old runtime.Object, dryRun bool) (admission.Attributes, bool) {
	u, ok := request.UserFrom(ctx)
	if !ok || sub == subRaw {
		return nil, false
	}
	m := accessor(obj)
	return admission.NewAttributesRecord(obj, old, res.GroupVersionKind(), m.GetNamespace(), m.GetName(),
		res.GroupVersionResource(), sub, op, nil, dryRun, u), true
}

// admit runs the mutating steps of every Admission in order.
func (s *Server) admit(ctx context.Context, res *registry.Resource, sub string, op admission.Operation,
	obj, old runtime.Object, dryRun bool) error {
	if len(s.cfg.Admission) == 0 {
		return nil
	}
	a, ok := attributes(ctx, res, sub, op, obj, old, dryRun)
	if !ok {
		return nil
	}
	for _, adm := range s.cfg.Admission {
		if err := adm.Admit(ctx, a); err != nil {
			return err
		}
	}
	return nil
}

// validateAdmission runs the validating steps of every Admission in order.
func (s *Server) validateAdmission(ctx context.Context, res *registry.Resource, sub string, op admission.Operation,
	obj, old runtime.Object, dryRun bool) error {
	if len(s.cfg.Admission) == 0 {
		return nil
	}
	a, ok := attributes(ctx, res, sub, op, obj, old, dryRun)
	if !ok {
		return nil
	}
	for _, adm := range s.cfg.Admission {
		if err := adm.Validate(ctx, a); err != nil {
			return err
		}
	}
	return nil
}
