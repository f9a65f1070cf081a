package openapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sort"
	"strings"
	"testing"

	"k8s.io/kube-openapi/pkg/cached"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

func get(t *testing.T, h http.Handler, path string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest("GET", path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func discovery(t *testing.T, s *Set) map[string]string {
	t.Helper()
	w := get(t, s, "/openapi/v3")
	if w.Code != http.StatusOK {
		t.Fatalf("discovery: %d %s", w.Code, w.Body)
	}
	var d handler3.OpenAPIV3Discovery
	if err := json.Unmarshal(w.Body.Bytes(), &d); err != nil {
		t.Fatalf("discovery: %v", err)
	}
	out := map[string]string{}
	for p, gv := range d.Paths {
		out[p] = gv.ServerRelativeURL
	}
	return out
}

func doc(title string) cached.Value[*spec3.OpenAPI] {
	return cached.Static(&spec3.OpenAPI{Version: "3.0.0", Info: &spec.Info{InfoProps: spec.InfoProps{Title: title}},
		Paths: &spec3.Paths{Paths: map[string]*spec3.Path{}}}, title)
}

func TestSetAddReplaceRemove(t *testing.T) {
	s := NewSet()
	if d := discovery(t, s); len(d) != 0 {
		t.Fatalf("empty set lists %v", d)
	}
	s.UpdateGroupVersion("api/v1", doc("core"))
	s.UpdateGroupVersion("apis/example.com/v1", doc("crd-1"))
	d := discovery(t, s)
	if len(d) != 2 || !strings.HasPrefix(d["api/v1"], "/openapi/v3/api/v1?hash=") || !strings.HasPrefix(d["apis/example.com/v1"], "/openapi/v3/apis/example.com/v1?hash=") {
		t.Fatalf("discovery: %v", d)
	}
	if got := s.GroupVersions(); !reflect.DeepEqual(got, []string{"api/v1", "apis/example.com/v1"}) {
		t.Fatalf("GroupVersions: %v", got)
	}

	// The document at its discovery URL, cacheable, and 304 for its ETag.
	w := get(t, s, d["apis/example.com/v1"])
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"title":"crd-1"`) || w.Header().Get("Cache-Control") != "public, immutable" {
		t.Fatalf("document: %d %v %s", w.Code, w.Header(), w.Body)
	}
	etag := w.Header().Get("Etag")
	if w := get(t, s, "/openapi/v3/apis/example.com/v1", "If-None-Match", etag); w.Code != http.StatusNotModified {
		t.Fatalf("If-None-Match %s: %d", etag, w.Code)
	}
	// An old hash redirects to the current one.
	if w := get(t, s, "/openapi/v3/apis/example.com/v1?hash=OLD"); w.Code != http.StatusMovedPermanently {
		t.Fatalf("old hash: %d", w.Code)
	}

	// Replacing a document changes its hash and only its own.
	s.UpdateGroupVersion("apis/example.com/v1", doc("crd-2"))
	d2 := discovery(t, s)
	if d2["apis/example.com/v1"] == d["apis/example.com/v1"] || d2["api/v1"] != d["api/v1"] {
		t.Fatalf("after replace: %v, before %v", d2, d)
	}
	if w := get(t, s, "/openapi/v3/apis/example.com/v1", "If-None-Match", etag); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "crd-2") {
		t.Fatalf("replaced document: %d %s", w.Code, w.Body)
	}

	s.DeleteGroupVersion("apis/example.com/v1")
	if d := discovery(t, s); len(d) != 1 || d["api/v1"] == "" {
		t.Fatalf("after delete: %v", d)
	}
	if _, err := s.Document("apis/example.com/v1"); err == nil {
		t.Fatal("deleted document still there")
	}
}

func swagger(path, def string) cached.Value[*spec.Swagger] {
	return cached.Static(&spec.Swagger{SwaggerProps: spec.SwaggerProps{Swagger: "2.0", Info: &spec.Info{InfoProps: spec.InfoProps{Title: "t", Version: "v"}},
		Paths:       &spec.Paths{Paths: map[string]spec.PathItem{path: {}}},
		Definitions: spec.Definitions{def: spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"object"}}}}}}, path)
}

func TestSetV2Parts(t *testing.T) {
	s := NewSet()
	s.UpdateV2("builtin", swagger("/api/v1/pods", "io.k8s.api.core.v1.Pod"))
	w := get(t, s, "/openapi/v2", "Accept", "application/json")
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "/api/v1/pods") {
		t.Fatalf("v2: %d %s", w.Code, w.Body)
	}
	etag := w.Header().Get("Etag")
	if w := get(t, s, "/openapi/v2", "If-None-Match", etag); w.Code != http.StatusNotModified {
		t.Fatalf("v2 If-None-Match: %d", w.Code)
	}
	s.UpdateV2("crd/example.com", swagger("/apis/example.com/v1/widgets", "com.example.v1.Widget"))
	var merged spec.Swagger
	w = get(t, s, "/openapi/v2")
	if err := json.Unmarshal(w.Body.Bytes(), &merged); err != nil {
		t.Fatal(err)
	}
	var paths, defs []string
	for p := range merged.Paths.Paths {
		paths = append(paths, p)
	}
	for d := range merged.Definitions {
		defs = append(defs, d)
	}
	sort.Strings(paths)
	sort.Strings(defs)
	if !reflect.DeepEqual(paths, []string{"/api/v1/pods", "/apis/example.com/v1/widgets"}) || len(defs) != 2 || w.Header().Get("Etag") == etag {
		t.Fatalf("merged v2: paths %v definitions %v", paths, defs)
	}
	s.DeleteV2("crd/example.com")
	if w := get(t, s, "/openapi/v2"); strings.Contains(w.Body.String(), "widgets") {
		t.Fatalf("v2 after delete: %s", w.Body)
	}
	if w := get(t, s, "/openapi/v2", "Accept", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"); w.Code != http.StatusOK ||
		w.Header().Get("Content-Type") != "application/com.github.proto-openapi.spec.v2.v1.0+protobuf" {
		t.Fatalf("v2 protobuf: %d %v", w.Code, w.Header())
	}
}
