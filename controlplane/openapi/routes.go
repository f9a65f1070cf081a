package openapi

import (
	"net/http"
	"reflect"
	"sort"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kube-openapi/pkg/common"

	"github.com/nodelet/nodelet/controlplane/registry"
)

// The routes of one group-version, derived from the resource table the
// way k8s.io/apiserver's endpoints/installer.go registers go-restful
// routes: the same paths, operation names, parameters (the options types'
// JSON fields, described by their SwaggerDoc), request and response
// types, and the x-kubernetes-action and x-kubernetes-group-version-kind
// metadata. kube-openapi's builders take them through its common.Route
// interfaces, so no go-restful container is built.
//
// Left out, because this server does not serve them: the deprecated
// /watch/ paths (watch is the list operation's watch parameter), and the
// apply patch types (server-side apply answers 415 for now).

const (
	actionGet              = "get"
	actionList             = "list"
	actionPost             = "post"
	actionPut              = "put"
	actionPatch            = "patch"
	actionDelete           = "delete"
	actionDeleteCollection = "deletecollection"
	actionConnect          = "connect"
)

var (
	// mediaTypes are what the server writes objects in (output.go);
	// streamMediaTypes what a watch is written in.
	mediaTypes       = []string{"application/json", "application/yaml", "application/vnd.kubernetes.protobuf"}
	streamMediaTypes = []string{"application/json;stream=watch"}
	// patchTypes are the patch types the server accepts (patch.go).
	patchTypes = []string{string(types.JSONPatchType), string(types.MergePatchType), string(types.StrategicMergePatchType)}
	// proxyMethods are upstream's for the proxy subresources.
	proxyMethods = []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"}
)

const prettyDoc = "If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent indicates a browser or command-line HTTP tool (curl and wget)."

// routeContainer is one group-version's routes (common.RouteContainer).
type routeContainer struct {
	root   string
	routes []common.Route
}

func (c *routeContainer) RootPath() string                   { return c.root }
func (c *routeContainer) PathParameters() []common.Parameter { return nil }
func (c *routeContainer) Routes() []common.Route             { return c.routes }

// route is one operation (common.Route).
type route struct {
	method, path, operation, doc string
	params                       []common.Parameter
	consumes, produces           []string
	metadata                     map[string]any
	reads, writes                any
	responses                    []common.StatusCodeResponse
}

func (r *route) Method() string                                   { return r.method }
func (r *route) Path() string                                     { return r.path }
func (r *route) OperationName() string                            { return r.operation }
func (r *route) Parameters() []common.Parameter                   { return r.params }
func (r *route) Description() string                              { return r.doc }
func (r *route) Consumes() []string                               { return r.consumes }
func (r *route) Produces() []string                               { return r.produces }
func (r *route) Metadata() map[string]any                         { return r.metadata }
func (r *route) RequestPayloadSample() any                        { return r.reads }
func (r *route) ResponsePayloadSample() any                       { return r.writes }
func (r *route) StatusCodeResponses() []common.StatusCodeResponse { return r.responses }

// returns adds a response: code, message, and the model written.
func (r *route) returns(code int, message string, model any) *route {
	r.responses = append(r.responses, response{code, message, model})
	return r
}

type response struct {
	code    int
	message string
	model   any
}

func (r response) Code() int       { return r.code }
func (r response) Message() string { return r.message }
func (r response) Model() any      { return r.model }

// param is one parameter (common.Parameter).
type param struct {
	name, doc, dataType string
	kind                common.ParameterKind
	required            bool
}

func (p param) Name() string               { return p.name }
func (p param) Description() string        { return p.doc }
func (p param) Required() bool             { return p.required }
func (p param) Kind() common.ParameterKind { return p.kind }
func (p param) DataType() string           { return p.dataType }
func (p param) AllowMultiple() bool        { return false }
func pathParam(name, doc string) param {
	return param{name, doc, "string", common.PathParameterKind, true}
}
func queryParam(name, doc, typ string) param {
	return param{name, doc, typ, common.QueryParameterKind, false}
}
func bodyParam(required bool) param { return param{"body", "", "", common.BodyParameterKind, required} }

// gvRoot is a group-version's path without the leading slash: api/v1,
// apis/apps/v1. It names the group-version's OpenAPI v3 document.
func gvRoot(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "api/" + gv.Version
	}
	return "apis/" + gv.Group + "/" + gv.Version
}

// routesFor returns the routes of one group-version's resources.
func routesFor(gv schema.GroupVersion, resources []*registry.Resource) *routeContainer {
	c := &routeContainer{root: "/" + gvRoot(gv)}
	sorted := append([]*registry.Resource(nil), resources...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for _, res := range sorted {
		c.routes = append(c.routes, resourceRoutes(c.root, res)...)
		subs := append([]string(nil), res.Subresources...)
		sort.Strings(subs)
		for _, sub := range subs {
			c.routes = append(c.routes, subresourceRoutes(c.root, res, sub)...)
		}
	}
	return c
}

func hasVerb(res *registry.Resource, verb string) bool {
	for _, v := range res.Verbs {
		if v == verb {
			return true
		}
	}
	return false
}

// paths returns a resource's collection and item paths and their
// parameters, and the operation name's scope word.
func paths(root string, res *registry.Resource) (collection, item string, collParams, itemParams []common.Parameter, scope string) {
	name := pathParam("name", "name of the "+res.Kind)
	if !res.Namespaced {
		collection = root + "/" + res.Name
		return collection, collection + "/{name}", nil, []common.Parameter{name}, ""
	}
	ns := pathParam("namespace", "object name and auth scope, such as for teams and projects")
	collection = root + "/namespaces/{namespace}/" + res.Name
	return collection, collection + "/{name}", []common.Parameter{ns}, []common.Parameter{ns, name}, "Namespaced"
}

// resourceRoutes are the main resource's operations, as the installer
// makes them for its verbs.
func resourceRoutes(root string, res *registry.Resource) []common.Route {
	coll, item, collParams, itemParams, scope := paths(root, res)
	obj, list := res.New(), any(nil)
	if res.NewList != nil {
		list = res.NewList()
	}
	gvk := res.GroupVersionKind()
	var out []*route
	add := func(r *route, action string, params []common.Parameter) {
		r.params = append(r.params, params...)
		r.metadata = routeMeta(gvk, action)
		out = append(out, r)
	}
	if res.Review {
		r := &route{method: "POST", path: coll, operation: "create" + scope + res.Kind, doc: "create" + article(res.Kind) + res.Kind,
			consumes: []string{"*/*"}, produces: mediaTypes, reads: obj, writes: obj,
			params: append([]common.Parameter{queryParam("pretty", prettyDoc, "string"), bodyParam(true)}, objectParams(&metav1.CreateOptions{})...)}
		r.returns(http.StatusOK, "OK", obj).returns(http.StatusCreated, "Created", obj).returns(http.StatusAccepted, "Accepted", obj)
		add(r, actionPost, collParams)
		return asRoutes(out)
	}
	if hasVerb(res, "list") && list != nil {
		doc := "list objects of kind " + res.Kind
		if hasVerb(res, "watch") {
			doc = "list or watch objects of kind " + res.Kind
		}
		listRoute := func(path, scope, suffix string) *route {
			r := &route{method: "GET", path: path, operation: "list" + scope + res.Kind + suffix, doc: doc,
				produces: append(append([]string(nil), mediaTypes...), streamMediaTypes...), writes: list,
				params: append([]common.Parameter{queryParam("pretty", prettyDoc, "string")}, objectParams(&metav1.ListOptions{})...)}
			return r.returns(http.StatusOK, "OK", list)
		}
		add(listRoute(coll, scope, ""), actionList, collParams)
		if res.Namespaced {
			add(listRoute(root+"/"+res.Name, "", "ForAllNamespaces"), actionList, nil)
		}
	}
	if hasVerb(res, "create") {
		r := &route{method: "POST", path: coll, operation: "create" + scope + res.Kind, doc: "create" + article(res.Kind) + res.Kind,
			consumes: []string{"*/*"}, produces: mediaTypes, reads: obj, writes: obj,
			params: append([]common.Parameter{queryParam("pretty", prettyDoc, "string"), bodyParam(true)}, objectParams(&metav1.CreateOptions{})...)}
		r.returns(http.StatusOK, "OK", obj).returns(http.StatusCreated, "Created", obj).returns(http.StatusAccepted, "Accepted", obj)
		add(r, actionPost, collParams)
	}
	if hasVerb(res, "deletecollection") && list != nil {
		params := append([]common.Parameter{queryParam("pretty", prettyDoc, "string"), bodyParam(false)}, objectParams(&metav1.DeleteOptions{})...)
		params = append(params, objectParams(&metav1.ListOptions{}, "watch", "allowWatchBookmarks")...)
		r := &route{method: "DELETE", path: coll, operation: "deletecollection" + scope + res.Kind, doc: "delete collection of " + res.Kind,
			consumes: []string{"*/*"}, produces: mediaTypes, reads: &metav1.DeleteOptions{}, writes: list, params: dedupe(params)}
		add(r.returns(http.StatusOK, "OK", list), actionDeleteCollection, collParams)
	}
	if hasVerb(res, "get") {
		r := &route{method: "GET", path: item, operation: "read" + scope + res.Kind, doc: "read the specified " + res.Kind,
			produces: mediaTypes, writes: obj, params: []common.Parameter{queryParam("pretty", prettyDoc, "string")}}
		add(r.returns(http.StatusOK, "OK", obj), actionGet, itemParams)
	}
	if hasVerb(res, "update") {
		add(putRoute(item, "replace"+scope+res.Kind, "replace the specified "+res.Kind, obj), actionPut, itemParams)
	}
	if hasVerb(res, "patch") {
		add(patchRoute(item, "patch"+scope+res.Kind, "partially update the specified "+res.Kind, obj), actionPatch, itemParams)
	}
	if hasVerb(res, "delete") {
		// This server answers a delete with the object, whatever its kind.
		r := &route{method: "DELETE", path: item, operation: "delete" + scope + res.Kind, doc: "delete" + article(res.Kind) + res.Kind,
			consumes: []string{"*/*"}, produces: mediaTypes, reads: &metav1.DeleteOptions{}, writes: obj,
			params: append([]common.Parameter{queryParam("pretty", prettyDoc, "string"), bodyParam(false)}, objectParams(&metav1.DeleteOptions{})...)}
		add(r.returns(http.StatusOK, "OK", obj).returns(http.StatusAccepted, "Accepted", obj), actionDelete, itemParams)
	}
	return asRoutes(out)
}

func putRoute(path, op, doc string, obj any) *route {
	r := &route{method: "PUT", path: path, operation: op, doc: doc, consumes: []string{"*/*"}, produces: mediaTypes, reads: obj, writes: obj,
		params: append([]common.Parameter{queryParam("pretty", prettyDoc, "string"), bodyParam(true)}, objectParams(&metav1.UpdateOptions{})...)}
	return r.returns(http.StatusOK, "OK", obj).returns(http.StatusCreated, "Created", obj)
}

func patchRoute(path, op, doc string, obj any) *route {
	r := &route{method: "PATCH", path: path, operation: op, doc: doc, consumes: patchTypes, produces: mediaTypes, reads: &metav1.Patch{}, writes: obj,
		params: append([]common.Parameter{queryParam("pretty", prettyDoc, "string"), bodyParam(true)}, objectParams(&metav1.PatchOptions{})...)}
	return r.returns(http.StatusOK, "OK", obj).returns(http.StatusCreated, "Created", obj)
}

// subresourceRoutes are a subresource's operations, with upstream's
// request and response types.
func subresourceRoutes(root string, res *registry.Resource, sub string) []common.Route {
	_, item, _, itemParams, scope := paths(root, res)
	path := item + "/" + sub
	title := strings.ToUpper(sub[:1]) + sub[1:]
	gvk := res.GroupVersionKind()
	var out []*route
	add := func(r *route, action string, kind schema.GroupVersionKind, params []common.Parameter) {
		r.params = append(r.params, params...)
		r.metadata = routeMeta(kind, action)
		out = append(out, r)
	}
	switch sub {
	case "status", "ephemeralcontainers", "scale":
		obj, kind := any(res.New()), gvk
		if sub == "scale" {
			obj, kind = &autoscalingv1.Scale{}, autoscalingv1.SchemeGroupVersion.WithKind("Scale")
		}
		get := &route{method: "GET", path: path, operation: "read" + scope + res.Kind + title, doc: "read " + sub + " of the specified " + res.Kind,
			produces: mediaTypes, writes: obj, params: []common.Parameter{queryParam("pretty", prettyDoc, "string")}}
		add(get.returns(http.StatusOK, "OK", obj), actionGet, kind, itemParams)
		add(putRoute(path, "replace"+scope+res.Kind+title, "replace "+sub+" of the specified "+res.Kind, obj), actionPut, kind, itemParams)
		add(patchRoute(path, "patch"+scope+res.Kind+title, "partially update "+sub+" of the specified "+res.Kind, obj), actionPatch, kind, itemParams)
	case "finalize":
		add(putRoute(path, "replace"+scope+res.Kind+title, "replace "+sub+" of the specified "+res.Kind, res.New()), actionPut, gvk, itemParams)
	case "binding", "eviction", "token":
		obj, kind := createSubresources[sub].obj, createSubresources[sub].gvk
		r := &route{method: "POST", path: path, operation: "create" + scope + res.Kind + title, doc: "create " + sub + " of" + article(res.Kind) + res.Kind,
			consumes: []string{"*/*"}, produces: mediaTypes, reads: obj, writes: obj,
			params: append([]common.Parameter{queryParam("pretty", prettyDoc, "string"), bodyParam(true)}, objectParams(&metav1.CreateOptions{})...)}
		r.returns(http.StatusOK, "OK", obj).returns(http.StatusCreated, "Created", obj).returns(http.StatusAccepted, "Accepted", obj)
		add(r, actionPost, kind, itemParams)
	case "log":
		r := &route{method: "GET", path: path, operation: "read" + scope + res.Kind + title, doc: "read " + sub + " of the specified " + res.Kind,
			produces: append([]string{"text/plain"}, mediaTypes...), writes: "",
			params: append([]common.Parameter{queryParam("pretty", prettyDoc, "string")}, objectParams(&corev1.PodLogOptions{})...)}
		add(r.returns(http.StatusOK, "OK", ""), actionGet, gvk, itemParams)
	default:
		opts, ok := connectOptions[res.Kind+"/"+sub]
		if !ok {
			return nil // nothing upstream documents
		}
		kind := corev1.SchemeGroupVersion.WithKind(reflect.TypeOf(opts).Elem().Name())
		methods := []string{"GET", "POST"}
		if sub == "proxy" {
			methods = proxyMethods
		}
		pathParamDoc := pathParam("path", "path to the resource")
		for _, withPath := range []bool{false, true} {
			if withPath && sub != "proxy" {
				continue
			}
			p, suffix, params := path, "", itemParams
			if withPath {
				p, suffix, params = path+"/{path}", "WithPath", append(append([]common.Parameter(nil), itemParams...), pathParamDoc)
			}
			for _, m := range methods {
				r := &route{method: m, path: p, operation: "connect" + m[:1] + strings.ToLower(m[1:]) + scope + res.Kind + title + suffix,
					doc: "connect " + m + " requests to " + sub + " of " + res.Kind, consumes: []string{"*/*"}, produces: []string{"*/*"},
					writes: "", params: objectParams(opts)}
				add(r.returns(http.StatusOK, "OK", ""), actionConnect, kind, params)
			}
		}
	}
	return asRoutes(out)
}

// createSubresources are the subresources a POST creates, with the
// object they take and return.
var createSubresources = map[string]struct {
	obj any
	gvk schema.GroupVersionKind
}{
	"binding":  {&corev1.Binding{}, corev1.SchemeGroupVersion.WithKind("Binding")},
	"eviction": {&policyv1.Eviction{}, policyv1.SchemeGroupVersion.WithKind("Eviction")},
	"token":    {&authenticationv1.TokenRequest{}, authenticationv1.SchemeGroupVersion.WithKind("TokenRequest")},
}

// connectOptions are the options types of the connect subresources.
var connectOptions = map[string]any{
	"Pod/exec":        &corev1.PodExecOptions{},
	"Pod/attach":      &corev1.PodAttachOptions{},
	"Pod/portforward": &corev1.PodPortForwardOptions{},
	"Pod/proxy":       &corev1.PodProxyOptions{},
	"Node/proxy":      &corev1.NodeProxyOptions{},
	"Service/proxy":   &corev1.ServiceProxyOptions{},
}

// routeMeta is the installer's route metadata.
func routeMeta(gvk schema.GroupVersionKind, action string) map[string]any {
	return map[string]any{
		"x-kubernetes-group-version-kind": metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
		"x-kubernetes-action":             action,
	}
}

func asRoutes(rs []*route) []common.Route {
	out := make([]common.Route, len(rs))
	for i, r := range rs {
		out[i] = r
	}
	return out
}

// dedupe keeps the first parameter of each name and kind.
func dedupe(params []common.Parameter) []common.Parameter {
	type key struct {
		name string
		kind common.ParameterKind
	}
	seen := map[key]bool{}
	var out []common.Parameter
	for _, p := range params {
		k := key{p.Name(), p.Kind()}
		if !seen[k] {
			seen[k] = true
			out = append(out, p)
		}
	}
	return out
}

// objectParams are an options struct's top-level JSON fields as query
// parameters, described by its SwaggerDoc, as the installer's
// AddObjectParams makes them (struct and pointer-to-struct fields are
// skipped, so are the excluded names).
func objectParams(obj any, excluded ...string) []common.Parameter {
	t := reflect.TypeOf(obj).Elem()
	var docs map[string]string
	if d, ok := obj.(interface{ SwaggerDoc() map[string]string }); ok {
		docs = d.SwaggerDoc()
	}
	var out []common.Parameter
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		switch k := f.Type.Kind(); {
		case k == reflect.Interface || k == reflect.Struct:
			continue
		case k == reflect.Pointer && (f.Type.Elem().Kind() == reflect.Struct || f.Type.Elem().Kind() == reflect.Interface):
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" || contains(excluded, name) {
			continue
		}
		out = append(out, queryParam(name, docs[name], jsonType(f.Type)))
	}
	return out
}

// jsonType is the installer's typeToJSON.
func jsonType(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	}
	return "string"
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// article is the installer's GetArticleForNoun with a space padding:
// none for a plural.
func article(noun string) string {
	if noun == "" || !strings.HasSuffix(noun, "ss") && strings.HasSuffix(noun, "s") {
		return " "
	}
	if strings.ContainsRune("aeiouAEIOU", rune(noun[0])) {
		return " an "
	}
	return " a "
}
