package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// readPatch reads a PATCH body and tells its patch type.
func (s *Server) readPatch(r *http.Request) (string, []byte, error) {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return "", nil, unsupportedMediaType(ct)
	}
	switch types.PatchType(mt) {
	case types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType,
		types.ApplyYAMLPatchType, types.ApplyCBORPatchType:
	default:
		return "", nil, unsupportedMediaType(ct)
	}
	body, err := readBody(r, s.cfg.MaxBodyBytes)
	if err != nil {
		return "", nil, err
	}
	return mt, body, nil
}

// Upstream's bounds on a JSON patch: at most maxJSONPatchOperations
// operations (413 beyond), and copy operations may add at most
// maxJSONPatchCopyBytes to the document (genericapiserver's
// JSONPatchMaxCopyBytes, the request body limit): without them forty
// copies of a growing array exhaust the server's memory
// (CVE-2019-1002100).
const (
	maxJSONPatchOperations = 10000
	maxJSONPatchCopyBytes  = DefaultMaxBodyBytes
)

// applyPatch applies patch to the JSON document cur. schemaObj is a value
// of the document's Go type, which strategic merge patch reads its merge
// keys from.
func applyPatch(patchType string, cur, patch []byte, schemaObj any) ([]byte, error) {
	var out []byte
	var err error
	switch types.PatchType(patchType) {
	case types.JSONPatchType:
		p, derr := jsonpatch.DecodePatch(patch)
		if derr != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid JSON patch: %v", derr))
		}
		if len(p) > maxJSONPatchOperations {
			return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf(
				"The allowed maximum operations in a JSON patch is %d, got %d", maxJSONPatchOperations, len(p)))
		}
		out, err = applyJSONPatch(p, cur)
	case types.MergePatchType:
		if !json.Valid(patch) {
			return nil, apierrors.NewBadRequest("invalid merge patch: body is not JSON")
		}
		out, err = jsonpatch.MergePatch(cur, patch)
	case types.StrategicMergePatchType:
		if !json.Valid(patch) {
			return nil, apierrors.NewBadRequest("invalid strategic merge patch: body is not JSON")
		}
		out, err = strategicpatch.StrategicMergePatch(cur, patch, schemaObj)
	default:
		return nil, unsupportedMediaType(patchType)
	}
	if err != nil {
		return nil, apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "patch", schema.GroupResource{}, "", err.Error(), 0, false)
	}
	return out, nil
}

// applyJSONPatch applies a decoded JSON patch within the copy bound.
func applyJSONPatch(p jsonpatch.Patch, cur []byte) ([]byte, error) {
	opts := jsonpatch.NewApplyOptions()
	opts.AccumulatedCopySizeLimit = maxJSONPatchCopyBytes
	return p.ApplyWithOptions(cur, opts)
}

// patchPinsRV reports whether the patch itself sets metadata.resourceVersion,
// which makes it a conditional patch (no retry on conflict).
func patchPinsRV(patchType string, patch []byte) bool {
	if types.PatchType(patchType) == types.JSONPatchType {
		return bytes.Contains(patch, []byte("/metadata/resourceVersion"))
	}
	var doc struct {
		Metadata struct {
			ResourceVersion *string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	return json.Unmarshal(patch, &doc) == nil && doc.Metadata.ResourceVersion != nil
}

// isApply tells the server-side apply patch types.
func isApply(patchType string) bool {
	return patchType == string(types.ApplyYAMLPatchType) || patchType == string(types.ApplyCBORPatchType)
}

// patchOpts reads and validates a patch's options as upstream's handler
// does (ValidatePatchOptions: apply needs a field manager, only apply
// takes force). An apply's manager is the one named; another patch's
// defaults to the user agent's first part.
func patchOpts(r *http.Request, patchType string) (opts writeOpts, force bool, err error) {
	q := r.URL.Query()
	o := &metav1.PatchOptions{DryRun: q["dryRun"], FieldManager: q.Get("fieldManager")}
	if v, ok := q["force"]; ok {
		// metav1's conversion of a query value to *bool.
		f := len(v) > 0 && v[0] != "0" && !strings.EqualFold(v[0], "false")
		o.Force = &f
	}
	if errs := validation.ValidatePatchOptions(o, types.PatchType(patchType)); len(errs) > 0 {
		return writeOpts{}, false, apierrors.NewInvalid(schemaGK(metav1.GroupName, "PatchOptions"), "", errs)
	}
	opts = writeOpts{dryRun: isDryRun(r), manager: o.FieldManager}
	if !isApply(patchType) {
		opts.manager = managerOrUserAgent(o.FieldManager, r.UserAgent())
	}
	return opts, o.Force != nil && *o.Force, nil
}

func (s *Server) servePatch(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	res := info.Resource
	patchType, patch, err := s.readPatch(r)
	if err != nil {
		return err
	}
	directive, err := fieldValidation(r)
	if err != nil {
		return err
	}
	opts, force, err := patchOpts(r, patchType)
	if err != nil {
		return err
	}
	if patchType == string(types.StrategicMergePatchType) && isUnstructured(res) {
		return unsupportedPatchForCustomResource(patchType)
	}
	if isApply(patchType) {
		return s.serveApply(w, r, info, applyRequest{patchType: patchType, patch: patch, opts: opts, force: force, directive: directive})
	}
	pinned := patchPinsRV(patchType, patch)
	out, err := s.update(r.Context(), res, info.Namespace, info.Name, info.Subresource, opts, func(cur runtime.Object) (runtime.Object, error) {
		curJSON, err := json.Marshal(cur)
		if err != nil {
			return nil, err
		}
		patched, err := applyPatch(patchType, curJSON, patch, res.New())
		if err != nil {
			return nil, err
		}
		obj := res.New()
		warnings, err := decodeJSON(patched, obj, directive)
		if err != nil {
			return nil, err
		}
		addWarnings(w, warnings)
		if err := checkKind(obj, res); err != nil {
			return nil, err
		}
		if err := dropUnknownFields(w, res, obj, directive); err != nil {
			return nil, err
		}
		m := accessor(obj)
		if m.GetName() != info.Name {
			return nil, apierrors.NewBadRequest("the name of an object cannot be changed by a patch")
		}
		if old := accessor(cur).GetUID(); m.GetUID() != old {
			return nil, apierrors.NewInvalid(res.GroupVersionKind().GroupKind(), info.Name, field.ErrorList{
				field.Invalid(field.NewPath("metadata", "uid"), m.GetUID(), "field is immutable")})
		}
		if !pinned {
			m.SetResourceVersion("")
		}
		return obj, nil
	})
	if err != nil {
		return err
	}
	return s.writeObject(w, r, http.StatusOK, res, out)
}
