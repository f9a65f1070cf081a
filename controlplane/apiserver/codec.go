package apiserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// readBody reads a request body of at most limit bytes.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, limit))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d bytes", limit))
		}
		if isTimeout(err) {
			return nil, timeoutError()
		}
		return nil, apierrors.NewBadRequest(fmt.Sprintf("read request body: %v", err))
	}
	return body, nil
}

// toJSON turns a body of the given content type into JSON.
func toJSON(body []byte, contentType string) ([]byte, error) {
	mt, _, err := mime.ParseMediaType(contentType)
	if contentType == "" {
		mt, err = "application/json", nil
	}
	if err != nil {
		return nil, unsupportedMediaType(contentType)
	}
	switch mt {
	case "application/json", "*/*":
		return body, nil
	case "application/yaml", "application/x-yaml", "text/yaml":
		j, err := yaml.YAMLToJSON(body)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid YAML: %v", err))
		}
		return j, nil
	}
	return nil, unsupportedMediaType(contentType)
}

func unsupportedMediaType(ct string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusUnsupportedMediaType,
		Reason:  metav1.StatusReasonUnsupportedMediaType,
		Message: fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf (got %q)", ct),
	}}
}

// fieldValidation is the request's fieldValidation directive (upstream's
// default is Warn).
func fieldValidation(r *http.Request) (string, error) {
	switch v := r.URL.Query().Get("fieldValidation"); v {
	case "", "Warn":
		return "Warn", nil
	case "Strict", "Ignore":
		return v, nil
	default:
		return "", apierrors.NewBadRequest(fmt.Sprintf("fieldValidation must be one of Ignore, Warn, Strict (got %q)", v))
	}
}

// decodeJSON decodes data into obj case-sensitively, as Kubernetes does.
// Unknown and duplicate fields fail a Strict request and become warnings
// for a Warn request.
func decodeJSON(data []byte, obj any, directive string) (warnings []string, err error) {
	strictErrs, err := kjson.UnmarshalStrict(data, obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("decode request body: %v", err))
	}
	if len(strictErrs) == 0 || directive == "Ignore" {
		return nil, nil
	}
	msgs := make([]string, len(strictErrs))
	for i, e := range strictErrs {
		msgs[i] = e.Error()
	}
	if directive == "Strict" {
		return nil, apierrors.NewBadRequest("strict decoding error: " + strings.Join(msgs, ", "))
	}
	return msgs, nil
}

// errEmptyBody is the error for a request without a body where one is needed.
var errEmptyBody = apierrors.NewBadRequest("the request body is empty")

func isEmptyBody(err error) bool { return errors.Is(err, errEmptyBody) }

const protobufType = "application/vnd.kubernetes.protobuf"

// decodeBody reads the request body into obj: JSON or YAML (with the
// request's fieldValidation directive, unknown fields becoming warnings or
// errors) or Kubernetes protobuf, which client-go sends by default for
// built-in types. It returns the warnings to send back.
func (s *Server) decodeBody(r *http.Request, obj runtime.Object, directive string) ([]string, error) {
	body, err := readBody(r, s.cfg.MaxBodyBytes)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, errEmptyBody
	}
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err == nil && mt == protobufType {
		if _, ok := obj.(runtime.Unstructured); ok {
			return nil, unsupportedMediaType(ct)
		}
		if _, _, err := s.protobuf.Decode(body, nil, obj); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("decode protobuf request body: %v", err))
		}
		return nil, nil
	}
	data, err := toJSON(body, ct)
	if err != nil {
		return nil, err
	}
	return decodeJSON(data, obj, directive)
}

// writeJSON writes v as a JSON response.
func writeJSON(w http.ResponseWriter, code int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		code = http.StatusInternalServerError
		data, _ = json.Marshal(apierrors.NewInternalError(err).Status())
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(data)
	w.Write([]byte("\n"))
}

// writeError writes err as a metav1.Status. Errors that are not API errors
// are internal errors: they are logged by the caller and reported as 500.
func writeError(w http.ResponseWriter, err error) {
	var status apierrors.APIStatus
	switch {
	case errors.As(err, &status):
	case isTimeout(err):
		status = timeoutError().(apierrors.APIStatus)
	default:
		status = apierrors.NewInternalError(err)
	}
	st := status.Status()
	st.Kind, st.APIVersion = "Status", "v1"
	if st.Code == 0 {
		st.Code = http.StatusInternalServerError
	}
	writeJSON(w, int(st.Code), st)
}

// headerWarnings is the warning.Recorder of one request: what the create
// and update paths (and any upstream code given the request's context)
// add with warning.AddWarning becomes a Warning header, each text once.
type headerWarnings struct {
	w    http.ResponseWriter
	seen map[string]bool
}

func (h *headerWarnings) AddWarning(_, text string) {
	if h.seen[text] {
		return
	}
	if h.seen == nil {
		h.seen = map[string]bool{}
	}
	h.seen[text] = true
	addWarnings(h.w, []string{text})
}

func addWarnings(w http.ResponseWriter, warnings []string) {
	for _, msg := range warnings {
		w.Header().Add("Warning", fmt.Sprintf("299 - %q", msg))
	}
}
