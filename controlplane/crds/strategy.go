package crds

import (
	"context"
	"fmt"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/operation"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/common"
	"k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
)

// strategy is one served version's rules for its custom resources, as
// upstream's pkg/registry/customresource strategy and status strategy and
// the customresource handler's decoder apply them, on upstream's
// libraries: pruning and metadata coercion, structural defaulting, the
// OpenAPI schema validator, list-type and embedded-metadata validation and
// the x-kubernetes-validations CEL rules (with ratcheting on update).
type strategy struct {
	kind       schema.GroupVersionKind
	namespaced bool
	// preserveUnknown is spec.preserveUnknownFields: nothing is pruned.
	preserveUnknown bool
	structural      *structuralschema.Structural // nil without a schema
	validator       apiservervalidation.SchemaValidator
	statusValidator apiservervalidation.SchemaValidator // nil without status subresource or schema
	cel             *cel.Validator                      // nil without rules
	hasStatus       bool
	scale           *apiextensionsv1.CustomResourceSubresourceScale // nil without scale subresource
}

// newStrategy builds version's strategy from crd, as upstream's
// getOrCreateServingInfoFor does.
func newStrategy(crd *apiextensionsv1.CustomResourceDefinition, version apiextensionsv1.CustomResourceDefinitionVersion) (*strategy, error) {
	s := &strategy{
		kind:            schema.GroupVersionKind{Group: crd.Spec.Group, Version: version.Name, Kind: crd.Status.AcceptedNames.Kind},
		namespaced:      crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
		preserveUnknown: crd.Spec.PreserveUnknownFields,
		hasStatus:       version.Subresources != nil && version.Subresources.Status != nil,
	}
	if version.Subresources != nil {
		s.scale = version.Subresources.Scale
	}
	var props *apiextensions.JSONSchemaProps
	if version.Schema != nil && version.Schema.OpenAPIV3Schema != nil {
		internal := &apiextensions.CustomResourceValidation{}
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(version.Schema, internal, nil); err != nil {
			return nil, fmt.Errorf("convert the schema of %s %s: %w", crd.Name, version.Name, err)
		}
		props = internal.OpenAPIV3Schema
		st, err := structuralschema.NewStructural(props)
		if err != nil && !crd.Spec.PreserveUnknownFields {
			return nil, fmt.Errorf("structural schema of %s %s: %w", crd.Name, version.Name, err)
		}
		if st != nil {
			st = st.DeepCopy()
			if err := structuraldefaulting.PruneDefaults(st); err != nil {
				return nil, fmt.Errorf("prune the defaults of %s %s: %w", crd.Name, version.Name, err)
			}
			s.structural = st
			s.cel = cel.NewValidator(st, true, celconfig.PerCallLimit)
		}
	}
	var err error
	if s.validator, _, err = apiservervalidation.NewSchemaValidator(props); err != nil {
		return nil, fmt.Errorf("schema validator of %s %s: %w", crd.Name, version.Name, err)
	}
	if s.hasStatus && props != nil {
		if statusProps, ok := props.Properties["status"]; ok {
			if s.statusValidator, _, err = apiservervalidation.NewSchemaValidator(&statusProps); err != nil {
				return nil, fmt.Errorf("status schema validator of %s %s: %w", crd.Name, version.Name, err)
			}
		}
	}
	return s, nil
}

// dropUnknown prunes what the schema does not declare and coerces the
// metadata (upstream's unstructuredSchemaCoercer), returning the paths of
// the unknown fields it dropped.
func (s *strategy) dropUnknown(obj runtime.Object) []string {
	u := obj.(*unstructured.Unstructured)
	var unknown []string
	kind, apiVersion := u.GetKind(), u.GetAPIVersion()
	om, found, metaUnknown, err := schemaobjectmeta.GetObjectMetaWithOptions(u.Object, schemaobjectmeta.ObjectMetaOptions{
		DropMalformedFields: true, ReturnUnknownFieldPaths: true})
	if err != nil {
		return nil
	}
	unknown = append(unknown, metaUnknown...)
	if s.structural != nil && !s.preserveUnknown {
		unknown = append(unknown, structuralpruning.PruneWithOptions(u.Object, s.structural, true,
			structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})...)
		structuraldefaulting.PruneNonNullableNullsWithoutDefaults(u.Object, s.structural)
	}
	if s.structural != nil {
		if _, paths := schemaobjectmeta.CoerceWithOptions(nil, u.Object, s.structural, false,
			schemaobjectmeta.CoerceOptions{DropInvalidFields: true, ReturnUnknownFieldPaths: true}); len(paths) > 0 {
			unknown = append(unknown, paths...)
		}
	}
	u.SetKind(kind)
	u.SetAPIVersion(apiVersion)
	if found {
		_ = schemaobjectmeta.SetObjectMeta(u.Object, om)
	}
	return unknown
}

// defaults applies the schema's defaults, after pruning as a decode does.
func (s *strategy) defaults(obj runtime.Object) {
	s.dropUnknown(obj)
	if s.structural != nil {
		structuraldefaulting.Default(obj.(*unstructured.Unstructured).Object, s.structural)
	}
}

func (s *strategy) prepareForCreate(obj runtime.Object) {
	if s.hasStatus {
		delete(obj.(*unstructured.Unstructured).Object, "status")
	}
}

// prepareForUpdate keeps the status of the stored object when status is
// a subresource.
func (s *strategy) prepareForUpdate(obj, old runtime.Object) {
	if !s.hasStatus {
		return
	}
	n, o := obj.(*unstructured.Unstructured).Object, old.(*unstructured.Unstructured).Object
	if st, ok := o["status"]; ok {
		n["status"] = runtime.DeepCopyJSONValue(st)
	} else {
		delete(n, "status")
	}
}

// prepareForStatusUpdate takes only status from obj, the rest (but
// managedFields) from the stored object, as upstream's status strategy.
func (s *strategy) prepareForStatusUpdate(obj, old runtime.Object) {
	u := obj.(*unstructured.Unstructured)
	status, ok := u.Object["status"]
	managed := u.GetManagedFields()
	rv := u.GetResourceVersion()
	*u = *old.(*unstructured.Unstructured).DeepCopy()
	u.SetManagedFields(managed)
	u.SetResourceVersion(rv)
	if ok {
		u.Object["status"] = status
	} else {
		delete(u.Object, "status")
	}
	s.defaults(u)
}

// specChanged is upstream's test for a new generation: anything but
// metadata changed (status is the stored one when it is a subresource).
func specChanged(obj, old runtime.Object) bool {
	strip := func(m map[string]interface{}) map[string]interface{} {
		out := make(map[string]interface{}, len(m))
		for k, v := range m {
			if k != "metadata" {
				out[k] = v
			}
		}
		return out
	}
	return !apiequality.Semantic.DeepEqual(strip(obj.(*unstructured.Unstructured).Object), strip(old.(*unstructured.Unstructured).Object))
}

// validate is upstream's customResourceStrategy.Validate. Hooks get no
// request context; CEL reads only cost limits from it.
func (s *strategy) validate(obj runtime.Object) field.ErrorList {
	ctx := context.Background()
	u := obj.(*unstructured.Unstructured)
	if errs := s.validateTypeMeta(u); len(errs) > 0 {
		return errs
	}
	errs := s.validateMeta(ctx, u, nil)
	errs = append(errs, apiservervalidation.ValidateCustomResource(nil, u.UnstructuredContent(), s.validator)...)
	errs = append(errs, validateScale(u, s.scale, true)...)
	errs = append(errs, schemaobjectmeta.Validate(ctx, nil, u.Object, s.structural, false)...)
	errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, s.structural, u.Object)...)
	return append(errs, s.validateCEL(ctx, errs, u, nil)...)
}

// validateUpdate is upstream's customResourceStrategy.ValidateUpdate,
// ratcheting included: what was already invalid and is unchanged is let be.
func (s *strategy) validateUpdate(obj, old runtime.Object) field.ErrorList {
	ctx := context.Background()
	u, o := obj.(*unstructured.Unstructured), old.(*unstructured.Unstructured)
	if errs := s.validateTypeMeta(u); len(errs) > 0 {
		return errs
	}
	correlated := common.NewCorrelatedObject(u.Object, o.Object, &model.Structural{Structural: s.structural})
	errs := s.validateMeta(ctx, u, o)
	errs = append(errs, apiservervalidation.ValidateCustomResourceUpdate(nil, u.UnstructuredContent(), o.UnstructuredContent(),
		s.validator, apiservervalidation.WithRatcheting(correlated))...)
	errs = append(errs, validateScale(u, s.scale, true)...)
	errs = append(errs, schemaobjectmeta.Validate(ctx, nil, u.Object, s.structural, false)...)
	if oldErrs := structurallisttype.ValidateListSetsAndMaps(nil, s.structural, o.Object); len(oldErrs) == 0 {
		errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, s.structural, u.Object)...)
	}
	return append(errs, s.validateCEL(ctx, errs, u, o, cel.WithRatcheting(correlated))...)
}

// validateStatusUpdate is upstream's statusStrategy.ValidateUpdate.
func (s *strategy) validateStatusUpdate(obj, old runtime.Object) field.ErrorList {
	ctx := context.Background()
	u, o := obj.(*unstructured.Unstructured), old.(*unstructured.Unstructured)
	if errs := s.validateTypeMeta(u); len(errs) > 0 {
		return errs
	}
	correlated := common.NewCorrelatedObject(u.Object, o.Object, &model.Structural{Structural: s.structural})
	errs := s.validateMeta(ctx, u, o)
	if status, ok := u.Object["status"]; ok && s.statusValidator != nil {
		var opts []apiservervalidation.ValidationOption
		if s.structural != nil {
			opts = append(opts, apiservervalidation.WithRatcheting(correlated.Key("status")))
		}
		errs = append(errs, apiservervalidation.ValidateCustomResourceUpdate(field.NewPath("status"), status, o.Object["status"], s.statusValidator, opts...)...)
	}
	errs = append(errs, validateScale(u, s.scale, false)...)
	if newErrs := structurallisttype.ValidateListSetsAndMaps(nil, s.structural, u.Object); len(newErrs) > 0 {
		if oldErrs := structurallisttype.ValidateListSetsAndMaps(nil, s.structural, o.Object); len(oldErrs) == 0 {
			errs = append(errs, newErrs...)
		}
	}
	return append(errs, s.validateCEL(ctx, errs, u, o, cel.WithRatcheting(correlated))...)
}

// validateCEL runs the x-kubernetes-validations rules unless errs holds an
// error that makes them meaningless (upstream's hasBlockingErr).
func (s *strategy) validateCEL(ctx context.Context, errs field.ErrorList, u, o *unstructured.Unstructured, opts ...cel.Option) field.ErrorList {
	if s.cel == nil {
		return nil
	}
	for _, e := range errs {
		switch e.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return field.ErrorList{field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation")}
		}
	}
	var old interface{}
	if o != nil {
		old = o.Object
	}
	celErrs, _ := s.cel.Validate(ctx, nil, s.structural, u.Object, old, celconfig.RuntimeCELCostBudget, opts...)
	return celErrs
}

func (s *strategy) validateTypeMeta(u *unstructured.Unstructured) field.ErrorList {
	var errs field.ErrorList
	if u.GetKind() != s.kind.Kind {
		errs = append(errs, field.Invalid(field.NewPath("kind"), u.GetKind(), fmt.Sprintf("must be %v", s.kind.Kind)))
	}
	if want := s.kind.GroupVersion().String(); u.GetAPIVersion() != want {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), u.GetAPIVersion(), fmt.Sprintf("must be %v", want)))
	}
	return errs
}

// validateMeta is upstream's object metadata validation of custom
// resources (names are DNS subdomains); old is nil on create.
func (s *strategy) validateMeta(ctx context.Context, u, o *unstructured.Unstructured) field.ErrorList {
	om, errs := objectMeta(u)
	if len(errs) > 0 {
		return errs
	}
	if o == nil {
		return metavalidation.ValidateObjectMetaDeclaratively(ctx, operation.Create, om, nil, s.namespaced,
			metavalidation.NameIsDNSSubdomain, field.NewPath("metadata"), declarativeBeta())
	}
	oldMeta, errs := objectMeta(o)
	if len(errs) > 0 {
		return errs
	}
	return metavalidation.ValidateObjectMetaDeclaratively(ctx, operation.Update, om, oldMeta, s.namespaced,
		nil, field.NewPath("metadata"), declarativeBeta())
}

func declarativeBeta() bool {
	return utilfeature.DefaultFeatureGate.Enabled(features.DeclarativeValidationBeta)
}

func objectMeta(u *unstructured.Unstructured) (*metav1.ObjectMeta, field.ErrorList) {
	raw, ok := u.Object["metadata"]
	if !ok || raw == nil {
		return &metav1.ObjectMeta{}, nil
	}
	m, ok := raw.(map[string]interface{})
	if !ok {
		return nil, field.ErrorList{field.Invalid(field.NewPath("metadata"), raw, fmt.Sprintf("expected map[string]interface{}, got %T", raw))}
	}
	om := &metav1.ObjectMeta{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, om); err != nil {
		return nil, field.ErrorList{field.Invalid(field.NewPath("metadata"), raw, err.Error())}
	}
	return om, nil
}
