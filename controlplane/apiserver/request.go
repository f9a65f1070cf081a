package apiserver

import (
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nodelet/nodelet/controlplane/registry"
)

// requestInfo is what the URL and method say about a resource request.
type requestInfo struct {
	Verb        string // get list watch create update patch delete deletecollection
	GV          schema.GroupVersion
	Resource    *registry.Resource
	ResourceArg string // the resource segment as written in the URL
	Namespace   string
	Name        string
	Subresource string
	// SubPath is what follows the subresource, with a leading slash:
	// "/stats/summary" for /api/v1/nodes/N/proxy/stats/summary. Only the
	// proxy subresources take one; upstream authorizes them as the bare
	// subresource ("nodes/proxy"), whatever the path.
	SubPath string
}

// parseResourcePath splits /api/v1/... and /apis/G/V/... into a
// requestInfo. ok is false when the path is not a resource path at all
// (discovery, health, ...); a resource path naming an unknown resource
// still returns ok with Resource nil, so the caller answers 404.
func parseResourcePath(method, path string, query map[string][]string, lookup func(schema.GroupVersion, string) *registry.Resource) (requestInfo, bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	var info requestInfo
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		info.GV = schema.GroupVersion{Version: parts[1]}
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		info.GV = schema.GroupVersion{Group: parts[1], Version: parts[2]}
		parts = parts[3:]
	default:
		return info, false
	}
	// namespaces/{ns}/{resource}/... except for the namespaces resource itself.
	if parts[0] == "namespaces" && len(parts) >= 3 {
		info.Namespace = parts[1]
		parts = parts[2:]
	}
	// An empty version or resource segment (/api//pods, /api/v1//x) names
	// no resource: the path is authorized as a non-resource URL and then
	// not found.
	if info.GV.Version == "" || parts[0] == "" {
		return requestInfo{}, false
	}
	info.ResourceArg = parts[0]
	if len(parts) > 1 {
		info.Name = parts[1]
	}
	if len(parts) > 2 {
		info.Subresource = parts[2]
	}
	if len(parts) > 3 {
		info.SubPath = "/" + strings.Join(parts[3:], "/")
	}
	info.Resource = lookup(info.GV, info.ResourceArg)
	if info.Resource == nil && info.Namespace != "" && info.Name == "" {
		// /api/v1/namespaces/{name}/{sub}: a subresource of the namespace
		// itself (status, finalize), not a namespaced resource.
		if ns := lookup(info.GV, "namespaces"); ns != nil {
			info.Resource = ns
			info.Subresource = info.ResourceArg
			info.Name = info.Namespace
			info.Namespace = ""
			info.ResourceArg = "namespaces"
		}
	}
	info.Verb = verbFor(method, info.Name, info.Subresource, query)
	return info, true
}

// verbFor is the authorization verb of a request. A subresource is never
// watched: the query of pods/NAME/proxy/?watch=1 is the pod's own.
func verbFor(method, name, subresource string, query map[string][]string) string {
	switch method {
	case http.MethodGet, http.MethodHead:
		if subresource == "" && isTrue(query["watch"]) {
			return "watch"
		}
		if name == "" {
			return "list"
		}
		return "get"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		if name == "" {
			return "deletecollection"
		}
		return "delete"
	}
	return ""
}

func isTrue(v []string) bool {
	return len(v) > 0 && (v[0] == "1" || v[0] == "true")
}
