package apiserver

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apiserver/pkg/warning"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/nodelet/nodelet/controlplane/openapi"
	"github.com/nodelet/nodelet/controlplane/registry"
)

// fieldManagers keeps metadata.managedFields and merges server-side apply
// patches with upstream's field manager (k8s.io/apimachinery's
// managedfields over structured-merge-diff), as k8s.io/apiserver's
// handlers call it. Its type information is the OpenAPI v3 schemas the
// server serves: one type converter per group-version document (or the
// two of a resource served in two versions, whose managed fields may
// name either), made on the first write to that group-version that needs
// it (a document's schemas hold every type its kinds reference), so an
// idle server keeps none and a later owner of a group-version (CRDs)
// replaces its converter with forget when the document changes.
type fieldManagers struct {
	docs *openapi.Set
	// otherVersion is, for a resource served in two versions (one Stored
	// as the other), the other one.
	otherVersion map[*registry.Resource]*registry.Resource

	mu sync.Mutex
	// converters by their documents' paths, joined by "+".
	converters map[string]managedfields.TypeConverter
	managers   map[fieldManagerKey]*managedfields.FieldManager
}

// fieldManagerKey is one field manager: a kind as written through one
// resource path and subresource ("" for the main resource).
type fieldManagerKey struct {
	gvk         schema.GroupVersionKind
	docs        string
	subresource string
}

func newFieldManagers(docs *openapi.Set, resources []*registry.Resource) *fieldManagers {
	f := &fieldManagers{docs: docs, otherVersion: map[*registry.Resource]*registry.Resource{},
		converters: map[string]managedfields.TypeConverter{}, managers: map[fieldManagerKey]*managedfields.FieldManager{}}
	for _, r := range resources {
		if r.Stored != nil && r.Convert != nil {
			f.otherVersion[r], f.otherVersion[r.Stored] = r.Stored, r
		}
	}
	return f
}

// forget drops what was made from a group-version's document (gvPath as
// openapi.Set names it), to be made again from its next version.
func (f *fieldManagers) forget(gvPath string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	names := func(docs string) bool { return slices.Contains(strings.Split(docs, "+"), gvPath) }
	for k := range f.converters {
		if names(k) {
			delete(f.converters, k)
		}
	}
	for k := range f.managers {
		if names(k.docs) {
			delete(f.managers, k)
		}
	}
}

// converterLocked returns the type converter of the documents named by
// docs (paths joined by "+"), all already built.
func (f *fieldManagers) converterLocked(docs string) (managedfields.TypeConverter, error) {
	if tc, ok := f.converters[docs]; ok {
		return tc, nil
	}
	schemas := map[string]*spec.Schema{}
	for _, gvPath := range strings.Split(docs, "+") {
		doc, err := f.docs.Document(gvPath)
		if err != nil {
			return nil, err
		}
		if doc.Components != nil {
			maps.Copy(schemas, doc.Components.Schemas)
		}
	}
	tc, err := managedfields.NewTypeConverter(schemas, false)
	if err != nil {
		return nil, fmt.Errorf("type converter for %s: %w", docs, err)
	}
	f.converters[docs] = tc
	return tc, nil
}

// forResource returns the field manager of res's objects written through
// sub ("" or a subresource that writes res's own kind).
func (f *fieldManagers) forResource(res *registry.Resource, sub string) (*managedfields.FieldManager, error) {
	types := objectTypes{kinds: []kindType{{res.GroupVersionKind(), res.New}}, defaults: res.Default}
	docs := []string{docPath(res.GroupVersion)}
	other := f.otherVersion[res]
	if other == nil && res.Stored != nil && res.Convert != nil {
		// A version of a custom resource that is not the storage one.
		other = res.Stored
	}
	if other != nil {
		types.kinds = append(types.kinds, kindType{other.GroupVersionKind(), other.New})
		types.convert = res.Convert
		if res.Convert == nil {
			types.convert = other.Convert
		}
		docs = append(docs, docPath(other.GroupVersion))
	}
	return f.get(types, strings.Join(docs, "+"), sub, resetFields(res, sub))
}

// forScale returns the field manager of res's scale subresource
// (autoscaling/v1 Scale, described in res's group-version document).
func (f *fieldManagers) forScale(res *registry.Resource) (*managedfields.FieldManager, error) {
	types := objectTypes{kinds: []kindType{{autoscalingv1.SchemeGroupVersion.WithKind("Scale"), func() runtime.Object { return &autoscalingv1.Scale{} }}}}
	return f.get(types, docPath(res.GroupVersion), "scale", nil)
}

func (f *fieldManagers) get(types objectTypes, docs, sub string, reset map[fieldpath.APIVersion]fieldpath.Filter) (*managedfields.FieldManager, error) {
	gvk := types.kinds[0].gvk
	key := fieldManagerKey{gvk: gvk, docs: docs, subresource: sub}
	f.mu.Lock()
	m, ok := f.managers[key]
	_, haveConverter := f.converters[docs]
	f.mu.Unlock()
	if ok {
		return m, nil
	}
	if !haveConverter {
		// Built (tens of ms the first time) without holding up the
		// writes of other group-versions.
		for _, gvPath := range strings.Split(docs, "+") {
			if _, err := f.docs.Document(gvPath); err != nil {
				return nil, err
			}
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if m, ok := f.managers[key]; ok {
		return m, nil
	}
	tc, err := f.converterLocked(docs)
	if err != nil {
		return nil, err
	}
	m, err = managedfields.NewDefaultFieldManager(tc, types, types, types, gvk, gvk.GroupVersion(), sub, reset)
	if err != nil {
		return nil, err
	}
	f.managers[key] = m
	return m, nil
}

func docPath(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "api/" + gv.Version
	}
	return "apis/" + gv.Group + "/" + gv.Version
}

// resetFields are the fields a write through sub does not set, and which
// its manager therefore does not own, as upstream's strategies'
// GetResetFields: the main resource does not write status, the status
// subresource writes neither spec nor (statusResetExtra) some metadata,
// pods/ephemeralcontainers only spec.ephemeralContainers.
func resetFields(res *registry.Resource, sub string) map[fieldpath.APIVersion]fieldpath.Filter {
	var filter fieldpath.Filter
	if paths, ok := csrReset[sub]; ok && groupResource(res) == csrResource {
		filter = fieldpath.NewExcludeSetFilter(fieldpath.NewSet(paths...))
		return map[fieldpath.APIVersion]fieldpath.Filter{fieldpath.APIVersion(res.GroupVersion.String()): filter}
	}
	switch {
	case sub == "" && res.HasSubresource("status"):
		filter = fieldpath.NewExcludeSetFilter(fieldpath.NewSet(fieldpath.MakePathOrDie("status")))
	case sub == "status":
		paths := append([]fieldpath.Path{fieldpath.MakePathOrDie("spec")}, statusResetExtra[groupResource(res)]...)
		filter = fieldpath.NewExcludeSetFilter(fieldpath.NewSet(paths...))
	case sub == "ephemeralcontainers":
		filter = fieldpath.NewIncludeMatcherFilter(fieldpath.MakePrefixMatcherOrDie("spec", "ephemeralContainers"))
	default:
		return nil
	}
	return map[fieldpath.APIVersion]fieldpath.Filter{fieldpath.APIVersion(res.GroupVersion.String()): filter}
}

// csrResource's strategies reset more than spec or status (upstream's
// GetResetFields): the main resource writes neither, the status
// subresource not the conditions, the approval subresource not the
// certificate.
var (
	csrResource = schema.GroupResource{Group: "certificates.k8s.io", Resource: "certificatesigningrequests"}
	csrReset    = map[string][]fieldpath.Path{
		"":         {fieldpath.MakePathOrDie("spec"), fieldpath.MakePathOrDie("status")},
		"status":   {fieldpath.MakePathOrDie("spec"), fieldpath.MakePathOrDie("status", "conditions")},
		"approval": {fieldpath.MakePathOrDie("spec"), fieldpath.MakePathOrDie("status", "certificate")},
	}
)

// statusResetExtra are the fields besides spec that upstream's status
// strategies of the served kinds reset.
var statusResetExtra = map[schema.GroupResource][]fieldpath.Path{
	{Group: "apps", Resource: "deployments"}: {fieldpath.MakePathOrDie("metadata", "labels")},
	{Resource: "pods"}: {fieldpath.MakePathOrDie("metadata", "deletionTimestamp"),
		fieldpath.MakePathOrDie("metadata", "ownerReferences")},
	{Group: "storage.k8s.io", Resource: "volumeattachments"}:                         {fieldpath.MakePathOrDie("metadata")},
	{Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicies"}: {fieldpath.MakePathOrDie("metadata")},
}

// objectTypes is the object convertor, defaulter and creater the field
// manager needs, for the kind it manages (kinds[0]) and the other version
// of the resource if it has one (kinds[1], converted to and from with
// convert). This server keeps every object in its request's version, so
// the hub is that version; the managed fields recorded in the other are
// compared through convert. Any other version is "not registered", which
// makes the merge drop what was recorded in it, as upstream does for a
// version it no longer serves.
type objectTypes struct {
	kinds    []kindType
	defaults func(runtime.Object)
	convert  func(in, out runtime.Object) error
}

type kindType struct {
	gvk schema.GroupVersionKind
	new func() runtime.Object
}

func (t objectTypes) kind(gvk schema.GroupVersionKind) (kindType, bool) {
	for _, k := range t.kinds {
		if k.gvk == gvk {
			return k, true
		}
	}
	return kindType{}, false
}

func (t objectTypes) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	k, ok := t.kind(gvk)
	if !ok {
		return nil, runtime.NewNotRegisteredErrForKind("nodelet", gvk)
	}
	obj := k.new()
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj, nil
}

func (t objectTypes) Default(obj runtime.Object) {
	if t.defaults != nil {
		t.defaults(obj)
	}
}

func (t objectTypes) Convert(in, out, _ any) error {
	return fmt.Errorf("field manager: conversion of %T to %T not supported", in, out)
}

// ConvertToVersion returns in (typed, or unstructured as the merge makes
// it) as the typed object of the target's kind.
func (t objectTypes) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	for _, k := range t.kinds {
		if to, ok := target.KindForGroupVersionKinds([]schema.GroupVersionKind{k.gvk}); ok && to == k.gvk {
			return t.as(in, k)
		}
	}
	return nil, runtime.NewNotRegisteredErrForKind("nodelet", in.GetObjectKind().GroupVersionKind())
}

func (t objectTypes) as(in runtime.Object, k kindType) (runtime.Object, error) {
	if u, ok := in.(*unstructured.Unstructured); ok {
		if out, ok := k.new().(*unstructured.Unstructured); ok {
			// A custom resource: unstructured in every version.
			if u.GroupVersionKind() == k.gvk {
				return u.DeepCopy(), nil
			}
			if t.convert == nil {
				return nil, runtime.NewNotRegisteredErrForKind("nodelet", k.gvk)
			}
			out.SetGroupVersionKind(k.gvk)
			if err := t.convert(u, out); err != nil {
				return nil, err
			}
			return out, nil
		}
		from, ok := t.kind(u.GroupVersionKind())
		if !ok {
			return nil, runtime.NewNotRegisteredErrForKind("nodelet", u.GroupVersionKind())
		}
		typed := from.new()
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, typed); err != nil {
			return nil, err
		}
		in = typed
	}
	out := k.new()
	if reflect.TypeOf(in) != reflect.TypeOf(out) {
		if t.convert == nil {
			return nil, runtime.NewNotRegisteredErrForKind("nodelet", k.gvk)
		}
		if err := t.convert(in, out); err != nil {
			return nil, err
		}
		in = out
	}
	in.GetObjectKind().SetGroupVersionKind(k.gvk)
	return in, nil
}

func (t objectTypes) ConvertFieldLabel(_ schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

// managerOrUserAgent is the field manager of a non-apply write: the one
// the request names, or its user agent's first part (upstream's
// handlers' managerOrUserAgent).
func managerOrUserAgent(manager, userAgent string) string {
	if manager != "" {
		return manager
	}
	m := strings.Split(userAgent, "/")[0]
	var buf bytes.Buffer
	for _, r := range m {
		if !unicode.IsPrint(r) {
			continue
		}
		if buf.Len()+utf8.RuneLen(r) > validation.FieldManagerMaxLength {
			break
		}
		buf.WriteRune(r)
	}
	return buf.String()
}

// keepManagedFieldsValid restores the managed fields a mutating admission
// plugin left invalid, with a warning, as upstream's
// NewManagedFieldsValidatingAdmissionController does.
func keepManagedFieldsValid(m metav1.Object, before []metav1.ManagedFieldsEntry) string {
	err := managedfields.ValidateManagedFields(m.GetManagedFields())
	if err == nil {
		return ""
	}
	m.SetManagedFields(before)
	return fmt.Sprintf(".metadata.managedFields was in an invalid state after admission; this could be caused by an outdated mutating admission controller; please fix your requests: %v", err)
}

// trackUpdate records in obj's managed fields what the write of obj over
// cur (an empty object for a create) changes for opts.manager, as
// upstream's handlers call UpdateNoErrors before mutating admission. The
// server's own writes (no manager) and the kinds without a schema keep
// cur's managed fields.
func (s *Server) trackUpdate(res *registry.Resource, sub string, cur, obj runtime.Object, opts writeOpts) {
	if opts.manager == "" || sub == subRaw {
		accessor(obj).SetManagedFields(accessor(cur).GetManagedFields())
		return
	}
	fm, err := s.fields.forResource(res, sub)
	if err != nil {
		s.log.Warn("no field manager: managedFields kept as they were", "resource", res.GroupVersionResource().String(), "err", err)
		accessor(obj).SetManagedFields(accessor(cur).GetManagedFields())
		return
	}
	out := fm.UpdateNoErrors(cur, obj, opts.manager)
	accessor(obj).SetManagedFields(accessor(out).GetManagedFields())
}

// admitKeepingFields runs the mutating admission of r, restoring the
// managed fields if a plugin left them invalid.
func (s *Server) admitKeepingFields(ctx context.Context, r admissionRequest) error {
	m := accessor(r.obj)
	before := m.GetManagedFields()
	if err := s.admit(ctx, r); err != nil {
		return err
	}
	if msg := keepManagedFieldsValid(m, before); msg != "" {
		warning.AddWarning(ctx, "", msg)
	}
	return nil
}
