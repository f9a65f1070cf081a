package crds

import (
	"fmt"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/cached"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// The OpenAPI documents of the served CRDs, built by upstream's builder
// (pkg/controller/openapi/builder) as its openapi (v2) and openapiv3
// controllers build them: one v3 document per group-version merging the
// CRDs that serve it, and one part of the v2 document per CRD. Each is
// built on first read (kubectl explain, server-side apply's type
// converter), not when a CRD changes.

func gvPath(gv schema.GroupVersion) string { return "apis/" + gv.Group + "/" + gv.Version }

// v2Part names a CRD's part of the v2 document.
func v2Part(name string) string { return "crd/" + name }

// v3Document is the lazily built document of gv from crds (the served
// CRDs with a served version gv), sorted by name.
func v3Document(gv schema.GroupVersion, crds []*apiextensionsv1.CustomResourceDefinition) cached.Value[*spec3.OpenAPI] {
	etag := make([]string, 0, len(crds))
	for _, crd := range crds {
		etag = append(etag, crd.Name+"@"+string(crd.UID)+"/"+crd.ResourceVersion)
	}
	tag := strings.Join(etag, ",")
	return cached.Once(cached.Func(func() (*spec3.OpenAPI, string, error) {
		specs := make([]*spec3.OpenAPI, 0, len(crds))
		for _, crd := range crds {
			s, err := builder.BuildOpenAPIV3(crd, gv.Version, builder.Options{V2: false, IncludeSelectableFields: true})
			if err != nil {
				return nil, "", fmt.Errorf("openapi v3 of %s %s: %w", crd.Name, gv.Version, err)
			}
			specs = append(specs, s)
		}
		merged, err := builder.MergeSpecsV3(specs...)
		if err != nil {
			return nil, "", fmt.Errorf("merge openapi v3 of %s: %w", gv, err)
		}
		return merged, tag, nil
	}))
}

// v2Document is the lazily built v2 part of crd: its served versions.
func v2Document(crd *apiextensionsv1.CustomResourceDefinition) cached.Value[*spec.Swagger] {
	tag := string(crd.UID) + "/" + crd.ResourceVersion
	return cached.Once(cached.Func(func() (*spec.Swagger, string, error) {
		merged := &spec.Swagger{}
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			s, err := builder.BuildOpenAPIV2(crd, v.Name, builder.Options{V2: true, IncludeSelectableFields: true})
			if err != nil {
				return nil, "", fmt.Errorf("openapi v2 of %s %s: %w", crd.Name, v.Name, err)
			}
			// As upstream: defaults pruned, to merge with the built-in part.
			s.Definitions = handler.PruneDefaults(s.Definitions)
			if merged, err = builder.MergeSpecs(merged, s); err != nil {
				return nil, "", fmt.Errorf("merge openapi v2 of %s: %w", crd.Name, err)
			}
		}
		return merged, tag, nil
	}))
}

// byGroupVersion groups the served versions of crds.
func byGroupVersion(crds []*apiextensionsv1.CustomResourceDefinition) map[schema.GroupVersion][]*apiextensionsv1.CustomResourceDefinition {
	out := map[schema.GroupVersion][]*apiextensionsv1.CustomResourceDefinition{}
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if v.Served {
				gv := schema.GroupVersion{Group: crd.Spec.Group, Version: v.Name}
				out[gv] = append(out[gv], crd)
			}
		}
	}
	for _, list := range out {
		sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	}
	return out
}
