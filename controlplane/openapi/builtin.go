package openapi

import (
	"fmt"
	"runtime/debug"
	"sort"
	"sync"
	"time"

	restful "github.com/emicklei/go-restful/v3"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiopenapi "k8s.io/apiserver/pkg/endpoints/openapi"
	aggregatoropenapi "k8s.io/kube-aggregator/pkg/generated/openapi"
	"k8s.io/kube-openapi/pkg/builder"
	"k8s.io/kube-openapi/pkg/builder3"
	"k8s.io/kube-openapi/pkg/cached"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
	generatedopenapi "k8s.io/kubernetes/pkg/generated/openapi"

	"github.com/nodelet/nodelet/controlplane/registry"
)

// BuiltinV2Part names the built-in resources' part of the v2 document.
const BuiltinV2Part = "builtin"

// AddBuiltins puts the documents of the built-in resources into set: one
// v3 document per group-version of resources and their part of the v2
// document, as kube-apiserver builds them (builder3 and builder over its
// routes, upstream's generated definitions, its definition namer and
// operation IDs). Nothing is built here: a document is built when first
// read and kept. Serving /openapi/v3 reads them all, since its discovery
// document names each one's hash (a client's first request, about 0.2 s
// of CPU, 12 MB of heap kept); Document reads one. The definitions are
// made once for the v3 documents built in a burst. version is the
// server's gitVersion, the documents' info.version.
func AddBuiltins(set *Set, resources []*registry.Resource, version string) {
	if version == "" {
		version = "unversioned" // as genericapiserver's completeOpenAPI
	}
	b := &builtins{byGV: map[schema.GroupVersion][]*registry.Resource{}, version: version}
	for _, r := range resources {
		b.byGV[r.GroupVersion] = append(b.byGV[r.GroupVersion], r)
	}
	b.pending = len(b.byGV)
	for gv := range b.byGV {
		etag := gvRoot(gv) + "@" + version
		set.UpdateGroupVersion(gvRoot(gv), cached.Once(cached.Func(func() (*spec3.OpenAPI, string, error) {
			doc, err := b.buildV3(gv)
			return doc, etag, err
		})))
	}
	set.UpdateV2(BuiltinV2Part, cached.Once(cached.Func(func() (*spec.Swagger, string, error) {
		doc, err := b.buildV2()
		return doc, BuiltinV2Part + "@" + version, err
	})))
}

// builtins builds the built-in documents on demand.
type builtins struct {
	byGV    map[schema.GroupVersion][]*registry.Resource
	version string

	mu    sync.Mutex
	namer *apiopenapi.DefinitionNamer
	// defs are upstream's definitions with v3 references (about 8 MB of
	// heap), kept while some v3 document is not built yet (pending), but
	// only for keepDefs after the last build: a client reads a few
	// group-versions in a burst (kubectl: the one it explains or applies).
	defs     map[string]common.OpenAPIDefinition
	pending  int
	dropDefs *time.Timer
}

// keepDefs is how long the definitions outlive the last v3 build.
const keepDefs = 30 * time.Second

func (b *builtins) buildV3(gv schema.GroupVersion) (*spec3.OpenAPI, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	cfg := b.v3ConfigLocked()
	if b.defs == nil {
		b.defs = cfg.GetDefinitions(func(name string) spec.Ref {
			defName, _ := cfg.GetDefinitionName(name)
			return spec.MustCreateRef("#/components/schemas/" + common.EscapeJsonPointer(defName))
		})
	}
	cfg.Definitions = b.defs
	doc, err := builder3.BuildOpenAPISpecFromRoutes([]common.RouteContainer{routesFor(gv, b.byGV[gv])}, cfg)
	if err != nil {
		return nil, fmt.Errorf("build openapi v3 of %s: %w", gv, err)
	}
	filterScopedGVKs(doc, gv)
	if b.pending--; b.pending <= 0 {
		b.defs = nil
		returnMemorySoon()
	} else if b.dropDefs == nil {
		b.dropDefs = time.AfterFunc(keepDefs, func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.defs = nil
		})
	} else {
		b.dropDefs.Reset(keepDefs)
	}
	return doc, nil
}

func (b *builtins) buildV2() (*spec.Swagger, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	gvs := make([]schema.GroupVersion, 0, len(b.byGV))
	for gv := range b.byGV {
		gvs = append(gvs, gv)
	}
	sort.Slice(gvs, func(i, j int) bool { return gvRoot(gvs[i]) < gvRoot(gvs[j]) })
	containers := make([]common.RouteContainer, len(gvs))
	for i, gv := range gvs {
		containers[i] = routesFor(gv, b.byGV[gv])
	}
	namer := b.namerLocked()
	cfg := &common.Config{
		ProtocolList:                   []string{"https"},
		Info:                           &spec.Info{InfoProps: spec.InfoProps{Title: "Kubernetes", Version: b.version}},
		DefaultResponse:                &spec.Response{ResponseProps: spec.ResponseProps{Description: "Default Response."}},
		CommonResponses:                map[int]spec.Response{401: {ResponseProps: spec.ResponseProps{Description: "Unauthorized"}}},
		GetOperationIDAndTagsFromRoute: operationIDAndTags,
		GetDefinitionName:              namer.GetDefinitionName,
		GetDefinitions:                 definitions,
		SecurityDefinitions: &spec.SecurityDefinitions{"BearerToken": &spec.SecurityScheme{SecuritySchemeProps: spec.SecuritySchemeProps{
			Type: "apiKey", Name: "authorization", In: "header", Description: "Bearer Token authentication"}}},
		DefaultSecurity: []map[string][]string{{"BearerToken": {}}},
	}
	doc, err := builder.BuildOpenAPISpecFromRoutes(containers, cfg)
	if err != nil {
		return nil, fmt.Errorf("build openapi v2: %w", err)
	}
	doc.Definitions = handler.PruneDefaults(doc.Definitions)
	returnMemorySoon()
	return doc, nil
}

// definitions are the generated definitions of k8s.io/kubernetes (the
// k8s.io/api kinds) and of kube-aggregator (APIService), as
// kube-apiserver's aggregator serves both.
func definitions(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
	defs := generatedopenapi.GetOpenAPIDefinitions(ref)
	for name, def := range aggregatoropenapi.GetOpenAPIDefinitions(ref) {
		if _, ok := defs[name]; !ok {
			defs[name] = def
		}
	}
	return defs
}

// returnMemorySoon gives the OS back, once the documents are serialized,
// what building them took: about 20 MB of garbage per document (the
// definitions, the schema graph, the JSON), which the runtime would
// otherwise keep as a raised heap goal on an idle server. The first
// /openapi/v3 request builds every v3 document (its discovery document
// lists each one's hash), /openapi/v2 the v2 one: each once.
func returnMemorySoon() {
	time.AfterFunc(2*time.Second, debug.FreeOSMemory)
}

// v3ConfigLocked is genericapiserver's DefaultOpenAPIV3Config as
// kube-apiserver completes it (title, version, bearer token security).
func (b *builtins) v3ConfigLocked() *common.OpenAPIV3Config {
	namer := b.namerLocked()
	return &common.OpenAPIV3Config{
		Info:                           &spec.Info{InfoProps: spec.InfoProps{Title: "Kubernetes", Version: b.version}},
		DefaultResponse:                &spec3.Response{ResponseProps: spec3.ResponseProps{Description: "Default Response."}},
		CommonResponses:                map[int]*spec3.Response{401: {ResponseProps: spec3.ResponseProps{Description: "Unauthorized"}}},
		GetOperationIDAndTagsFromRoute: operationIDAndTags,
		GetDefinitionName:              namer.GetDefinitionName,
		GetDefinitions:                 definitions,
		SecuritySchemes: spec3.SecuritySchemes{"BearerToken": &spec3.SecurityScheme{SecuritySchemeProps: spec3.SecuritySchemeProps{
			Type: "apiKey", Name: "authorization", In: "header", Description: "Bearer Token authentication"}}},
		DefaultSecurity: []map[string][]string{{"BearerToken": {}}},
	}
}

// namerLocked is upstream's definition namer (x-kubernetes-group-version-kind
// on each definition) over a scheme of the served kinds.
func (b *builtins) namerLocked() *apiopenapi.DefinitionNamer {
	if b.namer == nil {
		b.namer = apiopenapi.NewDefinitionNamer(b.scheme())
	}
	return b.namer
}

// scheme registers what the routes name: each resource's kind and list
// kind, the kinds of the create subresources and Scale, and the meta
// kinds every group-version has.
func (b *builtins) scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	seen := map[schema.GroupVersion]bool{}
	addGV := func(gv schema.GroupVersion) {
		if !seen[gv] {
			seen[gv] = true
			metav1.AddToGroupVersion(s, gv)
		}
	}
	for gv, resources := range b.byGV {
		addGV(gv)
		for _, r := range resources {
			s.AddKnownTypeWithName(r.GroupVersionKind(), r.New())
			if r.NewList != nil && r.ListKind != "" {
				s.AddKnownTypeWithName(gv.WithKind(r.ListKind), r.NewList())
			}
			for _, sub := range r.Subresources {
				if sub == "scale" {
					// As in upstream's scheme: the Scale definition names its
					// kind, which server-side apply's type converter needs.
					scale := autoscalingv1.SchemeGroupVersion.WithKind("Scale")
					addGV(scale.GroupVersion())
					if !s.Recognizes(scale) {
						s.AddKnownTypeWithName(scale, &autoscalingv1.Scale{})
					}
				}
				if c, ok := createSubresources[sub]; ok {
					addGV(c.gvk.GroupVersion())
					s.AddKnownTypeWithName(c.gvk, c.obj.(runtime.Object))
				}
			}
		}
	}
	return s
}

// operationIDAndTags is upstream's GetOperationIDAndTags (listCoreV1NamespacedPod,
// tag core_v1) for a route that is not go-restful's.
func operationIDAndTags(r common.Route) (string, []string, error) {
	return apiopenapi.GetOperationIDAndTags(&restful.Route{Operation: r.OperationName(), Path: r.Path()})
}

// filterScopedGVKs is k8s.io/apiserver's routes.filterScopedGVKs: in a
// group-version's document, the meta kinds registered into every group
// (WatchEvent, DeleteOptions) name only this group-version and core/v1.
func filterScopedGVKs(doc *spec3.OpenAPI, gv schema.GroupVersion) {
	if doc == nil || doc.Components == nil {
		return
	}
	for _, s := range doc.Components.Schemas {
		if s == nil {
			continue
		}
		gvks, ok := s.Extensions["x-kubernetes-group-version-kind"].([]interface{})
		if !ok || len(gvks) <= 1 {
			continue
		}
		if first, ok := gvks[0].(map[string]interface{}); !ok || (first["kind"] != "WatchEvent" && first["kind"] != "DeleteOptions") {
			continue
		}
		var kept []interface{}
		for _, item := range gvks {
			m, ok := item.(map[string]interface{})
			if !ok {
				continue
			}
			if (m["group"] == gv.Group && m["version"] == gv.Version) || (m["group"] == "" && m["version"] == "v1") {
				kept = append(kept, item)
			}
		}
		// A copy: the extensions may be shared with the definitions.
		ext := make(spec.Extensions, len(s.Extensions))
		for k, v := range s.Extensions {
			ext[k] = v
		}
		if len(kept) > 0 {
			ext["x-kubernetes-group-version-kind"] = kept
		} else {
			delete(ext, "x-kubernetes-group-version-kind")
		}
		s.Extensions = ext
	}
}
