package apiserver

import (
	"net/http"
	"slices"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"

	"github.com/nodelet/nodelet/controlplane/registry"
)

// Discovery is served in the legacy form (APIVersions, APIGroupList,
// APIResourceList). Clients that ask for aggregated discovery first get a
// plain application/json answer and fall back to it, as they do with any
// server that lacks aggregated discovery.

func (s *Server) serverAddresses(r *http.Request) []metav1.ServerAddressByClientCIDR {
	return []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host}}
}

func (s *Server) serveCoreVersions(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, &metav1.APIVersions{
		TypeMeta:                   metav1.TypeMeta{Kind: "APIVersions"},
		Versions:                   []string{"v1"},
		ServerAddressByClientCIDRs: s.serverAddresses(r),
	})
}

// servedGroupVersions is every group-version served: the resource
// table's, the built-in metrics API, and those of extension servers
// (which win over a local one of the same name, as a non-local
// APIService does upstream). The value says which are remote.
func (s *Server) servedGroupVersions(snap *resourceSnapshot) map[schema.GroupVersion]bool {
	gvs := map[schema.GroupVersion]bool{}
	for gv := range snap.byGV {
		gvs[gv] = false
	}
	if s.cfg.Metrics != nil {
		gvs[metricsGV] = false
	}
	for gv := range s.remote.all() {
		gvs[gv] = true
	}
	return gvs
}

// groups returns the served API groups (not the core group), sorted.
func (s *Server) groups() []metav1.APIGroup {
	versions := map[string][]string{}
	for gv := range s.servedGroupVersions(s.table.snapshot()) {
		if gv.Group != "" {
			versions[gv.Group] = append(versions[gv.Group], gv.Version)
		}
	}
	names := make([]string, 0, len(versions))
	for g := range versions {
		names = append(names, g)
	}
	sort.Strings(names)
	var out []metav1.APIGroup
	for _, g := range names {
		vs := versions[g]
		// Newest first (v2, v1, v1beta1): the first is the preferred version.
		sort.Slice(vs, func(i, j int) bool { return version.CompareKubeAwareVersionStrings(vs[i], vs[j]) > 0 })
		group := metav1.APIGroup{TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}, Name: g}
		for _, v := range vs {
			group.Versions = append(group.Versions, metav1.GroupVersionForDiscovery{GroupVersion: g + "/" + v, Version: v})
		}
		group.PreferredVersion = group.Versions[0]
		out = append(out, group)
	}
	return out
}

func (s *Server) serveGroups(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, &metav1.APIGroupList{
		TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
		Groups:   s.groups(),
	})
}

func (s *Server) serveGroup(w http.ResponseWriter, r *http.Request, name string) {
	for _, g := range s.groups() {
		if g.Name == name {
			writeJSON(w, http.StatusOK, &g)
			return
		}
	}
	writeError(w, apierrors.NewNotFound(schema.GroupResource{}, ""))
}

func (s *Server) serveResourceList(w http.ResponseWriter, r *http.Request, path string) {
	var gv schema.GroupVersion
	if path == "/api/v1" {
		gv = schema.GroupVersion{Version: "v1"}
	} else {
		parts := strings.Split(strings.TrimPrefix(path, "/apis/"), "/")
		gv = schema.GroupVersion{Group: parts[0], Version: parts[1]}
	}
	if gv == metricsGV && s.cfg.Metrics != nil {
		writeJSON(w, http.StatusOK, metricsResourceList())
		return
	}
	resources, ok := s.table.snapshot().byGV[gv]
	if !ok {
		writeError(w, apierrors.NewNotFound(schema.GroupResource{}, ""))
		return
	}
	writeJSON(w, http.StatusOK, resourceList(gv, resources))
}

// subresourceVerbs are upstream's verbs for each subresource.
var subresourceVerbs = map[string][]string{
	"status":   {"get", "patch", "update"},
	"scale":    {"get", "patch", "update"},
	"binding":  {"create"},
	"eviction": {"create"},
	"token":    {"create"},
	"finalize": {"update"},
	// Updates a CertificateSigningRequest's conditions only.
	"approval": {"get", "patch", "update"},
	// Updates spec.ephemeralContainers only.
	"ephemeralcontainers": {"get", "patch", "update"},
	// The connect subresources (proxy.go).
	"log":         {"get"},
	"exec":        {"create", "get"},
	"attach":      {"create", "get"},
	"portforward": {"create", "get"},
	"proxy":       {"create", "delete", "get", "patch", "update"},
}

// connectOptionsKinds name the options kind of a connect subresource
// after its resource's kind, as upstream: PodExecOptions, NodeProxyOptions.
var connectOptionsKinds = map[string]string{
	"exec":        "ExecOptions",
	"attach":      "AttachOptions",
	"portforward": "PortForwardOptions",
	"proxy":       "ProxyOptions",
}

func resourceList(gv schema.GroupVersion, resources map[string]*registry.Resource) *metav1.APIResourceList {
	list := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv.String()}
	names := make([]string, 0, len(resources))
	for n := range resources {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		res := resources[n]
		list.APIResources = append(list.APIResources, metav1.APIResource{
			Name: res.Name, SingularName: strings.ToLower(res.Kind), Namespaced: res.Namespaced,
			Kind: res.Kind, Verbs: res.Verbs, ShortNames: res.ShortNames, Categories: res.Categories,
		})
		// Sorted, as upstream lists them.
		subs := slices.Sorted(slices.Values(res.Subresources))
		for _, sub := range subs {
			ar := metav1.APIResource{Name: res.Name + "/" + sub, Namespaced: res.Namespaced, Kind: res.Kind, Verbs: subresourceVerbs[sub]}
			switch sub {
			case "scale":
				ar.Group, ar.Version, ar.Kind = "autoscaling", "v1", "Scale"
			case "binding":
				ar.Kind = "Binding"
			case "eviction":
				ar.Group, ar.Version, ar.Kind = "policy", "v1", "Eviction"
			case "token":
				ar.Group, ar.Version, ar.Kind = "authentication.k8s.io", "v1", "TokenRequest"
			}
			if suffix, ok := connectOptionsKinds[sub]; ok {
				ar.Kind = res.Kind + suffix
			}
			list.APIResources = append(list.APIResources, ar)
		}
	}
	return list
}
