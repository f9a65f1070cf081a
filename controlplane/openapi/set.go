// Package openapi owns the API server's OpenAPI documents: a v3 document
// per group-version and the v2 document, with upstream's schemas.
//
// A Set is what is served. It holds one lazily built v3 document per
// group-version path (api/v1, apis/apps/v1) behind kube-openapi's handler3
// (the /openapi/v3 discovery document with each document's hash, ETags,
// 304s, JSON or protobuf by Accept), and the v2 document, merged from
// named parts, behind kube-openapi's v2 handler. Built-in group-versions
// are put once at start (AddBuiltins, from upstream's generated
// definitions); a later owner of other group-versions (CRDs) puts and
// deletes its own while the server runs.
package openapi

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"

	"k8s.io/kube-openapi/pkg/aggregator"
	"k8s.io/kube-openapi/pkg/cached"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Paths the Set serves.
const (
	V2Path = "/openapi/v2"
	V3Path = "/openapi/v3"
)

// Set is the served OpenAPI documents. Safe for concurrent use.
type Set struct {
	v3        *handler3.OpenAPIService
	v2        *handler.OpenAPIService
	v2Handler http.Handler

	mu      sync.Mutex
	docs    map[string]cached.Value[*spec3.OpenAPI]
	v2Parts map[string]cached.Value[*spec.Swagger]
}

// NewSet returns an empty Set: a discovery document with no paths and an
// empty v2 document.
func NewSet() *Set {
	s := &Set{
		v3:      handler3.NewOpenAPIService(),
		docs:    map[string]cached.Value[*spec3.OpenAPI]{},
		v2Parts: map[string]cached.Value[*spec.Swagger]{},
	}
	s.v2 = handler.NewOpenAPIServiceLazy(s.mergedV2Locked())
	mux := &singlePath{}
	s.v2.RegisterOpenAPIVersionedService(V2Path, mux)
	s.v2Handler = mux.h
	return s
}

// UpdateGroupVersion adds or replaces the v3 document of a group-version
// path ("api/v1", "apis/apps/v1"). doc is read on first request and
// whenever its etag changes; a cached.Once over a build makes it lazy.
func (s *Set) UpdateGroupVersion(gvPath string, doc cached.Value[*spec3.OpenAPI]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.docs[gvPath] = doc
	s.v3.UpdateGroupVersionLazy(gvPath, doc)
}

// DeleteGroupVersion removes a group-version's v3 document.
func (s *Set) DeleteGroupVersion(gvPath string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.docs, gvPath)
	s.v3.DeleteGroupVersion(gvPath)
}

// GroupVersions returns the group-version paths with a v3 document, sorted.
func (s *Set) GroupVersions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.docs))
	for p := range s.docs {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// Document returns a group-version's v3 document, building it if it was
// not yet (the schemas a type converter for server-side apply is made of).
func (s *Set) Document(gvPath string) (*spec3.OpenAPI, error) {
	s.mu.Lock()
	doc, ok := s.docs[gvPath]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("openapi: no document for %q", gvPath)
	}
	d, _, err := doc.Get()
	return d, err
}

// UpdateV2 adds or replaces a named part of the v2 document. The served
// document is the parts merged in name order (kube-openapi's aggregator:
// paths already present are kept, conflicting definitions renamed).
func (s *Set) UpdateV2(part string, doc cached.Value[*spec.Swagger]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.v2Parts[part] = doc
	s.v2.UpdateSpecLazy(s.mergedV2Locked())
}

// DeleteV2 removes a named part of the v2 document.
func (s *Set) DeleteV2(part string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.v2Parts, part)
	s.v2.UpdateSpecLazy(s.mergedV2Locked())
}

// mergedV2Locked merges the current parts when first read after a change.
func (s *Set) mergedV2Locked() cached.Value[*spec.Swagger] {
	parts := make(map[string]cached.Value[*spec.Swagger], len(s.v2Parts))
	for k, v := range s.v2Parts {
		parts[k] = v
	}
	return cached.Merge(func(results map[string]cached.Result[*spec.Swagger]) (*spec.Swagger, string, error) {
		names := make([]string, 0, len(results))
		for n, r := range results {
			if r.Err != nil {
				return nil, "", fmt.Errorf("openapi v2 part %s: %w", n, r.Err)
			}
			names = append(names, n)
		}
		sort.Strings(names)
		if len(names) == 1 {
			r := results[names[0]]
			return r.Value, r.Etag, nil
		}
		merged := &spec.Swagger{SwaggerProps: spec.SwaggerProps{Swagger: "2.0", Info: &spec.Info{InfoProps: spec.InfoProps{Title: "Kubernetes", Version: "unversioned"}},
			Paths: &spec.Paths{Paths: map[string]spec.PathItem{}}, Definitions: spec.Definitions{}}}
		etags := make([]string, 0, len(names))
		for i, n := range names {
			part := results[n].Value
			if i == 0 && part.Info != nil {
				merged.Info, merged.SecurityDefinitions, merged.Security = part.Info, part.SecurityDefinitions, part.Security
			}
			if err := aggregator.MergeSpecsIgnorePathConflictRenamingDefinitionsAndParameters(merged, part); err != nil {
				return nil, "", fmt.Errorf("merge openapi v2 part %s: %w", n, err)
			}
			etags = append(etags, n+"="+results[n].Etag)
		}
		return merged, strings.Join(etags, ","), nil
	}, parts)
}

// ServeHTTP serves /openapi/v2, /openapi/v3 and /openapi/v3/<group-version>
// as kube-apiserver does; anything else is 404.
func (s *Set) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch p := r.URL.Path; {
	case p == V2Path:
		s.v2Handler.ServeHTTP(w, r)
	case p == V3Path || p == V3Path+"/":
		s.v3.HandleDiscovery(w, r)
	case strings.HasPrefix(p, V3Path+"/"):
		s.v3.HandleGroupVersion(w, r)
	default:
		http.NotFound(w, r)
	}
}

// singlePath catches the one handler kube-openapi's v2 service registers.
type singlePath struct{ h http.Handler }

func (m *singlePath) Handle(_ string, h http.Handler) { m.h = h }
