package apivalidation

import (
	"context"
	"fmt"
	"sort"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/install"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// CRDs defaults and validates apiextensions.k8s.io/v1
// CustomResourceDefinitions with upstream's code: the v1 defaulters, then
// pkg/apis/apiextensions/validation on the internal type, reached through
// the apiextensions install scheme (a scheme of its own: apiextensions is
// not a k8s.io/kubernetes group).
type CRDs struct {
	scheme *runtime.Scheme
}

// NewCRDs builds the CRD validator.
func NewCRDs() *CRDs {
	s := runtime.NewScheme()
	install.Install(s)
	return &CRDs{scheme: s}
}

// Default applies upstream's v1 defaulters (scope, conversion strategy,
// ...) to crd in place.
func (c *CRDs) Default(crd *apiextensionsv1.CustomResourceDefinition) {
	c.scheme.Default(crd)
}

// Internal converts crd (left unchanged) to the internal type, for code of
// upstream's that reads it (validation, the apiserver helpers).
func (c *CRDs) Internal(crd *apiextensionsv1.CustomResourceDefinition) (*apiextensions.CustomResourceDefinition, error) {
	out := &apiextensions.CustomResourceDefinition{}
	if err := c.scheme.Convert(crd.DeepCopy(), out, nil); err != nil {
		return nil, fmt.Errorf("convert CustomResourceDefinition %q to internal: %w", crd.Name, err)
	}
	return out, nil
}

func (c *CRDs) pair(obj, old *apiextensionsv1.CustomResourceDefinition) (*apiextensions.CustomResourceDefinition, *apiextensions.CustomResourceDefinition, error) {
	in, err := c.Internal(obj)
	if err != nil {
		return nil, nil, err
	}
	oldIn, err := c.Internal(old)
	return in, oldIn, err
}

// Validate is upstream's strategy validation for create. The context only
// carries what upstream's CEL cost estimates read; none is request-scoped.
func (c *CRDs) Validate(crd *apiextensionsv1.CustomResourceDefinition) field.ErrorList {
	in, err := c.Internal(crd)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	return crdvalidation.ValidateCustomResourceDefinition(context.Background(), in)
}

// ValidateUpdate is upstream's strategy validation for an update of the
// main resource.
func (c *CRDs) ValidateUpdate(crd, old *apiextensionsv1.CustomResourceDefinition) field.ErrorList {
	in, oldIn, err := c.pair(crd, old)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	return crdvalidation.ValidateCustomResourceDefinitionUpdate(context.Background(), in, oldIn)
}

// ValidateStatusUpdate is upstream's status strategy validation.
func (c *CRDs) ValidateStatusUpdate(crd, old *apiextensionsv1.CustomResourceDefinition) field.ErrorList {
	in, oldIn, err := c.pair(crd, old)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	return crdvalidation.ValidateUpdateCustomResourceDefinitionStatus(context.Background(), in, oldIn)
}

// SpecChanged is upstream's strategy test for a new generation: the spec
// differs semantically (compared as the internal type, as upstream does).
func (c *CRDs) SpecChanged(crd, old *apiextensionsv1.CustomResourceDefinition) bool {
	in, oldIn, err := c.pair(crd, old)
	if err != nil {
		return !apiequality.Semantic.DeepEqual(crd.Spec, old.Spec)
	}
	return !apiequality.Semantic.DeepEqual(in.Spec, oldIn.Spec)
}

// Warnings are upstream's strategy warnings for a new CRD (old nil) or
// an update: formats its schemas use that validation does not know, and
// list-type set on lists of objects or lists, each only when new.
func (c *CRDs) Warnings(crd, old *apiextensionsv1.CustomResourceDefinition) []string {
	in, err := c.Internal(crd)
	if err != nil {
		return nil
	}
	seen := map[string]bool{}
	if old != nil {
		if oldIn, err := c.Internal(old); err == nil {
			for _, w := range schemaWarnings(&oldIn.Spec) {
				seen[w] = true
			}
		}
	}
	var out []string
	for _, w := range schemaWarnings(&in.Spec) {
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

func schemaWarnings(crdSpec *apiextensions.CustomResourceDefinitionSpec) []string {
	compat := environment.DefaultCompatibilityVersion()
	var formats, sets []string
	visit := func(s *apiextensions.JSONSchemaProps) bool {
		if s.Format != "" {
			props := &spec.Schema{SchemaProps: spec.SchemaProps{Format: s.Format, Type: []string{s.Type}}}
			for _, f := range apiservervalidation.GetUnrecognizedFormats(props, compat) {
				formats = append(formats, fmt.Sprintf("unrecognized format %q", f))
			}
		}
		if s.XListType != nil && *s.XListType == "set" && s.Items != nil && s.Items.Schema != nil {
			switch s.Items.Schema.Type {
			case "object", "array":
				sets = append(sets, fmt.Sprintf("x-kubernetes-list-type: set for items of type %q is not supported by server-side apply or CEL validation rules", s.Items.Schema.Type))
			}
		}
		return false // every schema
	}
	if crdSpec.Validation != nil {
		crdvalidation.SchemaHas(crdSpec.Validation.OpenAPIV3Schema, visit)
	}
	for _, v := range crdSpec.Versions {
		if v.Schema != nil {
			crdvalidation.SchemaHas(v.Schema.OpenAPIV3Schema, visit)
		}
	}
	sort.Strings(sets)
	return append(formats, sets...)
}
