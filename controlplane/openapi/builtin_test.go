package openapi

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"

	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/nodelet/nodelet/controlplane/registry"
)

func hasGVK(ext spec.Extensions, group, version, kind string) bool {
	b, _ := json.Marshal(ext["x-kubernetes-group-version-kind"])
	var list []map[string]string
	if json.Unmarshal(b, &list) != nil {
		var one map[string]string
		if json.Unmarshal(b, &one) != nil {
			return false
		}
		list = append(list, one)
	}
	for _, m := range list {
		if m["group"] == group && m["version"] == version && m["kind"] == kind {
			return true
		}
	}
	return false
}

// TestBuiltinDocuments checks every served resource against its
// group-version's document: a schema named for its kind, and the
// operations kubectl reads (the PATCH operation's fieldValidation
// parameter and strategic merge patch).
func TestBuiltinDocuments(t *testing.T) {
	resources := registry.All()
	set := NewSet()
	AddBuiltins(set, resources, "v1.37.2+test")

	d := discovery(t, set)
	for _, r := range resources {
		if d[gvRoot(r.GroupVersion)] == "" {
			t.Fatalf("discovery lacks %s: %v", gvRoot(r.GroupVersion), d)
		}
	}
	if len(d) != len(set.GroupVersions()) {
		t.Fatalf("discovery %v, set %v", d, set.GroupVersions())
	}

	for _, r := range resources {
		doc, err := set.Document(gvRoot(r.GroupVersion))
		if err != nil {
			t.Fatalf("%s: %v", r.GroupVersion, err)
		}
		gvk := r.GroupVersionKind()
		found := false
		for _, s := range doc.Components.Schemas {
			if hasGVK(s.Extensions, gvk.Group, gvk.Version, gvk.Kind) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no schema for %s", gvRoot(r.GroupVersion), gvk)
		}
		if r.Review || !hasVerb(r, "patch") {
			continue
		}
		item := "/" + gvRoot(r.GroupVersion) + "/" + r.Name + "/{name}"
		if r.Namespaced {
			item = "/" + gvRoot(r.GroupVersion) + "/namespaces/{namespace}/" + r.Name + "/{name}"
		}
		p := doc.Paths.Paths[item]
		if p == nil || p.Patch == nil {
			t.Errorf("%s: no PATCH %s", gvk, item)
			continue
		}
		if !hasGVK(p.Patch.Extensions, gvk.Group, gvk.Version, gvk.Kind) || p.Patch.Extensions["x-kubernetes-action"] != "patch" {
			t.Errorf("%s: PATCH extensions %v", gvk, p.Patch.Extensions)
		}
		if p.Patch.RequestBody.Content["application/strategic-merge-patch+json"] == nil {
			t.Errorf("%s: PATCH content types %v", gvk, p.Patch.RequestBody.Content)
		}
		if !hasParam(p.Patch.Parameters, "fieldValidation") || !hasParam(p.Patch.Parameters, "dryRun") {
			t.Errorf("%s: PATCH parameters lack fieldValidation or dryRun", gvk)
		}
	}

	apps, _ := set.Document("apis/apps/v1")
	dep := apps.Components.Schemas["io.k8s.api.apps.v1.Deployment"]
	if dep == nil || !strings.Contains(dep.Description, "Deployment enables declarative updates") {
		t.Fatalf("Deployment schema: %+v", dep)
	}
	list := apps.Paths.Paths["/apis/apps/v1/namespaces/{namespace}/deployments"]
	if list == nil || list.Get == nil || list.Get.OperationId != "listAppsV1NamespacedDeployment" || list.Post == nil ||
		list.Post.OperationId != "createAppsV1NamespacedDeployment" || list.Get.Tags[0] != "apps_v1" {
		t.Fatalf("deployments collection: %+v", list)
	}
	scale := apps.Paths.Paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"]
	if scale == nil || scale.Put == nil || !hasGVK(scale.Put.Extensions, "autoscaling", "v1", "Scale") {
		t.Fatalf("deployments/scale: %+v", scale)
	}
	core, _ := set.Document("api/v1")
	if exec := core.Paths.Paths["/api/v1/namespaces/{namespace}/pods/{name}/exec"]; exec == nil || exec.Get == nil || exec.Get.OperationId != "connectCoreV1GetNamespacedPodExec" {
		t.Fatalf("pods/exec: %+v", exec)
	}
	if proxy := core.Paths.Paths["/api/v1/nodes/{name}/proxy/{path}"]; proxy == nil || proxy.Head == nil {
		t.Fatalf("nodes/proxy/{path}: %+v", proxy)
	}
	if _, ok := core.Components.Schemas["io.k8s.api.apps.v1.Deployment"]; ok {
		t.Fatal("api/v1 holds apps/v1 schemas")
	}
	// DeleteOptions names only this group-version and core/v1.
	del := apps.Components.Schemas["io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"]
	if !hasGVK(del.Extensions, "apps", "v1", "DeleteOptions") || hasGVK(del.Extensions, "batch", "v1", "DeleteOptions") {
		t.Fatalf("DeleteOptions kinds: %v", del.Extensions)
	}

	v2 := get(t, set, "/openapi/v2")
	var sw spec.Swagger
	if err := json.Unmarshal(v2.Body.Bytes(), &sw); err != nil {
		t.Fatal(err)
	}
	if sw.Paths.Paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"].Patch == nil || sw.Definitions["io.k8s.api.core.v1.Pod"].Description == "" {
		t.Fatal("v2 lacks deployments PATCH or the Pod definition")
	}
}

func hasParam(params []*spec3.Parameter, name string) bool {
	for _, p := range params {
		if p.Name == name {
			return true
		}
	}
	return false
}

// TestBuiltinCost logs what building costs: the first document (with
// upstream's definitions), the rest, and the heap they keep.
func TestBuiltinCost(t *testing.T) {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	set := NewSet()
	AddBuiltins(set, registry.All(), "v1.37.2+test")
	start := time.Now()
	w := get(t, set, "/openapi/v3/apis/apps/v1")
	first := time.Since(start)
	start = time.Now()
	get(t, set, "/openapi/v3/apis/apps/v1")
	warm := time.Since(start)
	start = time.Now()
	size := 0
	for _, gv := range set.GroupVersions() {
		size += get(t, set, "/openapi/v3/"+gv).Body.Len()
	}
	rest := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&m1)
	t.Logf("apps/v1 first %v (%d bytes), warm %v; all %d v3 documents %v (%d bytes); heap kept %.1f MB",
		first, w.Body.Len(), warm, len(set.GroupVersions()), rest, size, float64(m1.HeapAlloc-m0.HeapAlloc)/1e6)
	runtime.KeepAlive(set)
}
