package registry

import (
	"sort"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodelet/nodelet/controlplane/apivalidation"
)

// customResourceDefinitionResource is apiextensions.k8s.io/v1
// customresourcedefinitions (+status), cluster-scoped, with upstream's
// defaults, validation and strategy (pkg/registry/customresourcedefinition:
// status reset on create and kept on update, the storage version recorded
// in status.storedVersions, generation bumped on a spec change). Serving
// the resources a CRD defines is controlplane/crds's job.
func customResourceDefinitionResource(v *apivalidation.CRDs) *Resource {
	type crd = apiextensionsv1.CustomResourceDefinition
	return &Resource{
		GroupVersion: apiextensionsv1.SchemeGroupVersion,
		Name:         "customresourcedefinitions",
		Kind:         "CustomResourceDefinition",
		ListKind:     "CustomResourceDefinitionList",
		ShortNames:   []string{"crd", "crds"},
		Categories:   []string{"api-extensions"},
		Verbs:        allVerbs(),
		New:          func() runtime.Object { return &crd{} },
		NewList:      func() runtime.Object { return &apiextensionsv1.CustomResourceDefinitionList{} },
		Subresources: []string{"status"},

		TrackGeneration: true,
		Default:         mutate(v.Default),
		PrepareForCreate: mutate(func(c *crd) {
			c.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
			recordStorageVersion(c)
		}),
		PrepareForUpdate: mutate2(func(c, old *crd) {
			c.Status = *old.Status.DeepCopy()
			recordStorageVersion(c)
		}),
		// Upstream's status strategy keeps the spec and lets metadata
		// change (its ResetObjectMetaForStatus is given the new object
		// twice).
		PrepareForStatusUpdate: mutate2(func(c, old *crd) { c.Spec = *old.Spec.DeepCopy() }),
		SpecChanged:            changed(v.SpecChanged),

		Validate:             func(obj runtime.Object) field.ErrorList { return v.Validate(obj.(*crd)) },
		ValidateUpdate:       func(obj, old runtime.Object) field.ErrorList { return v.ValidateUpdate(obj.(*crd), old.(*crd)) },
		ValidateStatusUpdate: func(obj, old runtime.Object) field.ErrorList { return v.ValidateStatusUpdate(obj.(*crd), old.(*crd)) },

		WarningsOnCreate: func(obj runtime.Object) []string { return v.Warnings(obj.(*crd), nil) },
		WarningsOnUpdate: func(obj, old runtime.Object) []string { return v.Warnings(obj.(*crd), old.(*crd)) },

		Columns: crdColumns(),
		Row:     row(crdRow),
	}
}

// recordStorageVersion adds the storage version to status.storedVersions
// if missing, as upstream's strategy does on create and update.
func recordStorageVersion(c *apiextensionsv1.CustomResourceDefinition) {
	for _, v := range c.Spec.Versions {
		if !v.Storage {
			continue
		}
		for _, s := range c.Status.StoredVersions {
			if s == v.Name {
				return
			}
		}
		c.Status.StoredVersions = append(c.Status.StoredVersions, v.Name)
		return
	}
}

// crdColumns are upstream's CRD table columns
// (pkg/registry/customresourcedefinition/tableconvertor).
func crdColumns() []metav1.TableColumnDefinition {
	docs := metav1.ObjectMeta{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Scope", Type: "string", Description: "Cluster/Namespaced"},
		{Name: "Versions", Type: "string", Description: "Served versions"},
		{Name: "Created At", Type: "date", Description: docs["creationTimestamp"]},
		{Name: "Group", Type: "string", Priority: 1, Description: "API group"},
		{Name: "Kind", Type: "string", Priority: 1, Description: "CustomResource kind"},
		{Name: "ShortNames", Type: "string", Priority: 1, Description: "Short names"},
		{Name: "Established", Type: "boolean", Priority: 1, Description: "Established status"},
	}
}

func crdRow(c *apiextensionsv1.CustomResourceDefinition, _ time.Time) []interface{} {
	var versions []string
	for _, v := range c.Spec.Versions {
		if v.Served {
			label := v.Name
			if v.Storage {
				label += "(storage)"
			}
			versions = append(versions, label)
		}
	}
	sort.Strings(versions)
	established := false
	for _, cond := range c.Status.Conditions {
		if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
			established = true
		}
	}
	return []interface{}{
		c.Name, string(c.Spec.Scope), strings.Join(versions, ","),
		c.CreationTimestamp.Time.UTC().Format(time.RFC3339),
		c.Spec.Group, c.Spec.Names.Kind, strings.Join(c.Spec.Names.ShortNames, ","), established,
	}
}
