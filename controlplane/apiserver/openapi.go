package apiserver

import (
	"net/http"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The OpenAPI v3 documents served here describe operations, not schemas:
// for each resource, its PATCH operation with the fieldValidation query
// parameter and the patch types it accepts. That is what kubectl reads to
// decide that validation happens server-side (so it needs no schema of its
// own) and which patch type apply should use (strategic merge from its
// built-in types). `kubectl explain`, which needs schemas, reports that the
// resource is not found in the schema.

func (s *Server) serveOpenAPIV3(w http.ResponseWriter, r *http.Request, path string) {
	rest := strings.TrimPrefix(strings.TrimPrefix(path, "/openapi/v3"), "/")
	if rest == "" {
		paths := map[string]any{}
		for gv := range s.resources {
			p := gvPath(gv)
			paths[p] = map[string]string{"serverRelativeURL": "/openapi/v3/" + p + "?hash=" + s.openAPIHash()}
		}
		writeJSON(w, http.StatusOK, map[string]any{"paths": paths})
		return
	}
	for gv, resources := range s.resources {
		if gvPath(gv) != rest {
			continue
		}
		names := make([]string, 0, len(resources))
		for n := range resources {
			names = append(names, n)
		}
		sort.Strings(names)
		paths := map[string]any{}
		for _, n := range names {
			res := resources[n]
			if res.Review {
				continue // create only: nothing to patch
			}
			item := "/" + gvPath(gv) + "/"
			if res.Namespaced {
				item += "namespaces/{namespace}/"
			}
			item += res.Name + "/{name}"
			gvk := res.GroupVersionKind()
			paths[item] = map[string]any{"patch": map[string]any{
				"operationId": "patch" + res.Kind,
				"x-kubernetes-group-version-kind": map[string]string{
					"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind},
				"parameters": []map[string]any{
					{"name": "fieldValidation", "in": "query", "schema": map[string]string{"type": "string"}},
					{"name": "dryRun", "in": "query", "schema": map[string]string{"type": "string"}},
				},
				"requestBody": map[string]any{"content": map[string]any{
					"application/json-patch+json":  map[string]any{},
					"application/merge-patch+json": map[string]any{},
				}},
				"responses": map[string]any{"200": map[string]any{"description": "OK"}},
			}}
		}
		w.Header().Set("Cache-Control", "public, immutable")
		writeJSON(w, http.StatusOK, map[string]any{
			"openapi": "3.0.0",
			"info":    map[string]string{"title": "nodelet", "version": s.cfg.Version.GitVersion},
			"paths":   paths,
			// No schemas are published; an empty set makes kubectl explain
			// say so instead of failing inside its template.
			"components": map[string]any{"schemas": map[string]any{}},
		})
		return
	}
	writeError(w, apierrors.NewNotFound(schema.GroupResource{}, ""))
}

func gvPath(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "api/" + gv.Version
	}
	return "apis/" + gv.Group + "/" + gv.Version
}

// openAPIHash changes when the served document could change: with the
// server version.
func (s *Server) openAPIHash() string {
	v := s.cfg.Version.GitVersion
	if v == "" {
		v = "dev"
	}
	return strings.NewReplacer("+", "-", ".", "-").Replace(v)
}
