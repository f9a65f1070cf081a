package apiserver

import (
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodelet/nodelet/controlplane/registry"
)

// Custom resources (the resources a CustomResourceDefinition defines) are
// *unstructured.Unstructured objects: they have no protobuf, so they are
// stored as JSON, answered as JSON or YAML (a client that accepts only
// protobuf gets 406, as upstream), and a strategic merge patch, which
// needs Go types for its merge keys, is refused with 415, as upstream.

// isUnstructured reports whether res's objects are unstructured.
func isUnstructured(res *registry.Resource) bool {
	_, ok := res.New().(runtime.Unstructured)
	return ok
}

// unstructuredMetadata reads the metadata of an unstructured object as
// ObjectMeta (for PartialObjectMetadata), dropping what does not parse.
func unstructuredMetadata(u *unstructured.Unstructured) metav1.ObjectMeta {
	var om metav1.ObjectMeta
	if m, ok := u.Object["metadata"].(map[string]interface{}); ok {
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(m, &om)
	}
	return om
}

// unsupportedPatchForCustomResource is upstream's answer to a strategic
// merge patch of a custom resource.
func unsupportedPatchForCustomResource(patchType string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType, Reason: metav1.StatusReasonUnsupportedMediaType,
		Message: fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/apply-patch+cbor (got %q)", patchType),
	}}
}

// dropUnknownFields runs res's DropUnknown (custom resources: pruning
// against the schema) and reports what it dropped as the request's
// fieldValidation directive says, as upstream's decoder reports unknown
// fields: an error for Strict, warnings for Warn.
func dropUnknownFields(w http.ResponseWriter, res *registry.Resource, obj runtime.Object, directive string) error {
	if res.DropUnknown == nil {
		return nil
	}
	paths := res.DropUnknown(obj)
	if len(paths) == 0 || directive == "Ignore" {
		return nil
	}
	msgs := make([]string, len(paths))
	for i, p := range paths {
		msgs[i] = fmt.Sprintf("unknown field %q", p)
	}
	if directive == "Strict" {
		return apierrors.NewBadRequest("strict decoding error: " + strings.Join(msgs, ", "))
	}
	addWarnings(w, msgs)
	return nil
}
