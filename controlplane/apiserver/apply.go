package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	cbor "k8s.io/apimachinery/pkg/runtime/serializer/cbor/direct"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apiserver/pkg/warning"
)

// applyRequest is one server-side apply (a PATCH of an apply patch type).
type applyRequest struct {
	patchType string
	patch     []byte
	opts      writeOpts
	force     bool
	directive string
}

// decode reads the applied configuration as upstream's applyPatcher does:
// YAML (JSON is YAML) or CBOR into an unstructured object.
func (a applyRequest) decode() (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	unmarshal := yaml.Unmarshal
	if a.patchType == string(types.ApplyCBORPatchType) {
		unmarshal = cbor.Unmarshal
	}
	if err := unmarshal(a.patch, &u.Object); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err))
	}
	return u, nil
}

// checkStrict reports duplicate fields in a YAML apply patch: an error for
// fieldValidation=Strict, a warning for Warn (unknown fields fail the
// merge itself, whatever the directive, as upstream).
func (a applyRequest) checkStrict(ctx context.Context) error {
	if a.directive == "Ignore" || a.patchType == string(types.ApplyCBORPatchType) {
		return nil
	}
	if err := yaml.UnmarshalStrict(a.patch, &map[string]any{}); err != nil {
		if a.directive == "Strict" {
			return apierrors.NewBadRequest(fmt.Sprintf("error strict decoding patch: %v", err))
		}
		warning.AddWarning(ctx, "", err.Error())
	}
	return nil
}

// applyError is err as upstream answers a merge failure that is not an
// API error (a field the schema does not declare, a value of the wrong
// type): 500 with the error's own message and no reason, as its
// ErrorToAPIStatus makes it (kubectl prints "Error from server: ...").
func applyError(err error) error {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return err
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure,
		Code: http.StatusInternalServerError, Message: err.Error()}}
}

// serveApply merges an applied configuration into the object with
// upstream's field manager (conflicts are 409 unless force), or creates
// the object from it if there is none, as upstream's patch handler does;
// the result goes through admission, the update or create rules and
// validation like any other write.
func (s *Server) serveApply(w http.ResponseWriter, r *http.Request, info requestInfo, a applyRequest) error {
	res, ctx := info.Resource, r.Context()
	patchObj, err := a.decode()
	if err != nil {
		return err
	}
	fm, err := s.fields.forResource(res, info.Subresource)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("server-side apply of %s: %w", res.GroupVersionResource(), err))
	}
	a.opts.ownFields = true
	apply := func(cur runtime.Object) (runtime.Object, error) {
		obj, err := fm.Apply(cur, patchObj.DeepCopy(), a.opts.manager, a.force)
		if err != nil {
			return nil, applyError(err)
		}
		if err := a.checkStrict(ctx); err != nil {
			return nil, err
		}
		m := accessor(obj)
		if m.GetName() != info.Name {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", m.GetName(), info.Name))
		}
		if res.Namespaced && m.GetNamespace() != "" && m.GetNamespace() != info.Namespace {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the namespace of the object (%s) does not match the namespace on the request (%s)", m.GetNamespace(), info.Namespace))
		}
		return obj, nil
	}
	for attempt := 0; ; attempt++ {
		found := false
		out, err := s.update(ctx, res, info.Namespace, info.Name, info.Subresource, a.opts, func(cur runtime.Object) (runtime.Object, error) {
			found = true
			obj, err := apply(cur)
			if err != nil {
				return nil, err
			}
			m := accessor(obj)
			if old := accessor(cur).GetUID(); m.GetUID() != old {
				return nil, apierrors.NewInvalid(res.GroupVersionKind().GroupKind(), info.Name, field.ErrorList{
					field.Invalid(field.NewPath("metadata", "uid"), m.GetUID(), "field is immutable")})
			}
			// Only a resourceVersion in the configuration is a precondition.
			m.SetResourceVersion(patchObj.GetResourceVersion())
			return obj, nil
		})
		if found || info.Subresource != "" || !apierrors.IsNotFound(err) {
			if err != nil {
				return err
			}
			return s.writeObject(w, r, http.StatusOK, res, out)
		}
		live := res.New()
		setTypeMeta(res, live)
		obj, err := apply(live)
		if err != nil {
			return err
		}
		m := accessor(obj)
		if uid := m.GetUID(); uid != "" {
			return apierrors.NewConflict(groupResource(res), info.Name,
				fmt.Errorf("uid mismatch: the provided object specified uid %s, and no existing object was found", uid))
		}
		if res.Namespaced {
			m.SetNamespace(info.Namespace)
		}
		out, err = s.create(ctx, res, obj, a.opts)
		if apierrors.IsAlreadyExists(err) && attempt < 3 {
			continue // created meanwhile: apply to it
		}
		if err != nil {
			return err
		}
		return s.writeObject(w, r, http.StatusCreated, res, out)
	}
}
