package crds

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/conversion"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource/tableconvertor"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/client-go/util/jsonpath"

	"github.com/nodelet/nodelet/controlplane/registry"
)

// resources returns the registry resources that serve crd: one per served
// version, named by its accepted names. The storage version is stored as
// itself; every other version is Stored as it and converted with the
// CRD's conversion (see converter). terminating stops
// creates, as upstream refuses them while the CRD's instances are deleted.
func resources(crd *apiextensionsv1.CustomResourceDefinition, terminating bool, converters *conversion.CRConverterFactory) ([]*registry.Resource, error) {
	convert, err := converter(crd, converters)
	if err != nil {
		return nil, err
	}
	var storage *registry.Resource
	var others []*registry.Resource
	for _, v := range crd.Spec.Versions {
		if !v.Served && !v.Storage {
			continue
		}
		r, err := versionResource(crd, v, terminating)
		if err != nil {
			return nil, err
		}
		if v.Storage {
			storage = r
		}
		if v.Served {
			others = append(others, r)
		}
	}
	if storage == nil {
		return nil, fmt.Errorf("serve %s: no storage version", crd.Name)
	}
	var out []*registry.Resource
	for _, r := range others {
		if r != storage {
			r.Stored, r.Convert = storage, convert
		}
		out = append(out, r)
	}
	return out, nil
}

// converter returns the Convert of crd's versions: upstream's CR
// converter (pkg/apiserver/conversion) for its strategy, None (the
// apiVersion changes) or Webhook (a ConversionReview to the CRD's
// webhook). It converts in into out's version (set by out's New).
func converter(crd *apiextensionsv1.CustomResourceDefinition, converters *conversion.CRConverterFactory) (func(in, out runtime.Object) error, error) {
	if crd.Spec.Conversion == nil {
		crd = crd.DeepCopy()
		crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
	}
	_, unsafe, err := converters.NewConverter(crd)
	if err != nil {
		return nil, fmt.Errorf("converter of %s: %w", crd.Name, err)
	}
	return func(in, out runtime.Object) error {
		o, ok := out.(*unstructured.Unstructured)
		if !ok {
			return fmt.Errorf("convert %T to %T: custom resources are unstructured", in, out)
		}
		converted, err := unsafe.ConvertToVersion(in.DeepCopyObject(), o.GroupVersionKind().GroupVersion())
		if err != nil {
			return fmt.Errorf("convert %s to %s: %w", in.GetObjectKind().GroupVersionKind(), o.GroupVersionKind().GroupVersion(), err)
		}
		u, ok := converted.(*unstructured.Unstructured)
		if !ok {
			return fmt.Errorf("convert to %s: got %T", o.GroupVersionKind().GroupVersion(), converted)
		}
		o.Object = u.Object
		return nil
	}, nil
}

// deprecationWarning is what every request for a deprecated version is
// told, upstream's default unless the CRD gives its own.
func deprecationWarning(gv schema.GroupVersion, kind string, v apiextensionsv1.CustomResourceDefinitionVersion) string {
	switch {
	case !v.Deprecated:
		return ""
	case v.DeprecationWarning != nil:
		return *v.DeprecationWarning
	default:
		return fmt.Sprintf("%s %s is deprecated", gv, kind)
	}
}

func versionResource(crd *apiextensionsv1.CustomResourceDefinition, v apiextensionsv1.CustomResourceDefinitionVersion, terminating bool) (*registry.Resource, error) {
	names := crd.Status.AcceptedNames
	gv := schema.GroupVersion{Group: crd.Spec.Group, Version: v.Name}
	s, err := newStrategy(crd, v)
	if err != nil {
		return nil, err
	}
	table, err := newTable(v.AdditionalPrinterColumns)
	if err != nil {
		return nil, fmt.Errorf("printer columns of %s %s: %w", crd.Name, v.Name, err)
	}
	verbs := []string{"delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"}
	if terminating {
		verbs = []string{"delete", "deletecollection", "get", "list", "patch", "update", "watch"}
	}
	gvk, listGVK := gv.WithKind(names.Kind), gv.WithKind(names.ListKind)
	r := &registry.Resource{
		Warning:      deprecationWarning(gv, names.Kind, v),
		GroupVersion: gv,
		Name:         names.Plural,
		Kind:         names.Kind,
		ListKind:     names.ListKind,
		Namespaced:   crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
		ShortNames:   names.ShortNames,
		Categories:   names.Categories,
		Verbs:        verbs,
		New: func() runtime.Object {
			u := &unstructured.Unstructured{Object: map[string]interface{}{}}
			u.SetGroupVersionKind(gvk)
			return u
		},
		NewList: func() runtime.Object {
			l := &unstructured.UnstructuredList{Object: map[string]interface{}{}}
			l.SetGroupVersionKind(listGVK)
			return l
		},
		TrackGeneration:  true,
		SpecChanged:      specChanged,
		DropUnknown:      s.dropUnknown,
		Default:          s.defaults,
		PrepareForCreate: s.prepareForCreate,
		PrepareForUpdate: s.prepareForUpdate,
		Validate:         s.validate,
		ValidateUpdate:   s.validateUpdate,
		Columns:          table.columns,
		Row:              table.row,
	}
	if s.hasStatus {
		r.Subresources = append(r.Subresources, "status")
		r.PrepareForStatusUpdate = s.prepareForStatusUpdate
		r.ValidateStatusUpdate = s.validateStatusUpdate
	}
	if s.scale != nil {
		r.Subresources = append(r.Subresources, "scale")
		r.Scale = scaleAccess(s.scale)
	}
	if fieldsFn, err := selectableFields(v.SelectableFields); err != nil {
		return nil, fmt.Errorf("selectable fields of %s %s: %w", crd.Name, v.Name, err)
	} else if fieldsFn != nil {
		r.Fields = fieldsFn
	}
	return r, nil
}

// crTable renders rows with upstream's tableconvertor (the version's
// additionalPrinterColumns, or Age when it has none).
type crTable struct {
	convertor rest.TableConvertor
	columns   []metav1.TableColumnDefinition
}

func newTable(cols []apiextensionsv1.CustomResourceColumnDefinition) (*crTable, error) {
	if len(cols) == 0 {
		cols = []apiextensionsv1.CustomResourceColumnDefinition{{Name: "Age", Type: "date",
			Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"], JSONPath: ".metadata.creationTimestamp"}}
	}
	c, err := tableconvertor.New(cols)
	if err != nil {
		return nil, err
	}
	// The headers, from a table of nothing.
	empty, err := c.ConvertToTable(context.Background(), &unstructured.UnstructuredList{Object: map[string]interface{}{}}, nil)
	if err != nil {
		return nil, err
	}
	return &crTable{convertor: c, columns: empty.ColumnDefinitions}, nil
}

func (t *crTable) row(obj runtime.Object, _ time.Time) []interface{} {
	table, err := t.convertor.ConvertToTable(context.Background(), obj, nil)
	if err != nil || len(table.Rows) == 0 {
		return make([]interface{}, len(t.columns))
	}
	return table.Rows[0].Cells
}

// selectableFields returns the field-selector fields of a version's
// selectableFields (upstream's strategy, by JSONPath), nil without any.
func selectableFields(sfs []apiextensionsv1.SelectableField) (func(runtime.Object) fields.Set, error) {
	if len(sfs) == 0 {
		return nil, nil
	}
	type sel struct {
		name string
		path *jsonpath.JSONPath
	}
	var sels []sel
	for _, sf := range sfs {
		p := jsonpath.New("selectableField")
		p.AllowMissingKeys(true)
		if err := p.Parse("{" + sf.JSONPath + "}"); err != nil {
			return nil, fmt.Errorf("parse %q: %w", sf.JSONPath, err)
		}
		sels = append(sels, sel{name: sf.JSONPath[1:], path: p})
	}
	return func(obj runtime.Object) fields.Set {
		set := fields.Set{}
		content := obj.(*unstructured.Unstructured).Object
		for _, s := range sels {
			set[s.name] = ""
			results, err := s.path.FindResults(content)
			if err == nil && len(results) == 1 && len(results[0]) == 1 {
				if v := results[0][0].Interface(); v != nil {
					set[s.name] = fmt.Sprint(v)
				}
			}
		}
		return set
	}, nil
}
