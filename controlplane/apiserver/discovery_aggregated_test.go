package apiserver

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/nodelet/nodelet/controlplane/registry"
	"github.com/nodelet/nodelet/controlplane/storage"
)

const acceptAggregatedV2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

// TestAggregatedDiscovery: /api and /apis answer apidiscovery.k8s.io/v2
// to those who ask for it (client-go does first), with an ETag and 304,
// the legacy documents to others, and a resource added to the table
// while serving appears in both.
func TestAggregatedDiscovery(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	client, err := rest.HTTPClientFor(env.config)
	if err != nil {
		t.Fatal(err)
	}
	get := func(path, accept, etag string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, env.config.Host+path, nil)
		req.Header.Set("Accept", accept)
		if etag != "" {
			req.Header.Set("If-None-Match", etag)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, body
	}
	aggregated := func(path string) (apidiscoveryv2.APIGroupDiscoveryList, string) {
		t.Helper()
		resp, body := get(path, acceptAggregatedV2, "")
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != acceptAggregatedV2 {
			t.Fatalf("GET %s: %s, Content-Type %q\n%s", path, resp.Status, resp.Header.Get("Content-Type"), body)
		}
		var list apidiscoveryv2.APIGroupDiscoveryList
		if err := json.Unmarshal(body, &list); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return list, resp.Header.Get("ETag")
	}

	core, etag := aggregated("/api")
	if len(core.Items) != 1 || core.Items[0].Name != "" || core.Items[0].Versions[0].Version != "v1" {
		t.Fatalf("/api: %+v", core.Items)
	}
	pods := findResource(core.Items[0].Versions[0], "pods")
	if pods == nil || pods.Scope != apidiscoveryv2.ScopeNamespace || pods.ResponseKind.Kind != "Pod" || pods.ResponseKind.Version != "v1" ||
		pods.SingularResource != "pod" || !slices.Contains(pods.ShortNames, "po") || !slices.Contains(pods.Categories, "all") {
		t.Fatalf("/api pods: %+v", pods)
	}
	var subs []string
	for _, sub := range pods.Subresources {
		subs = append(subs, sub.Subresource)
		if sub.Subresource == "eviction" && (sub.ResponseKind.Group != "policy" || sub.ResponseKind.Kind != "Eviction") {
			t.Fatalf("pods/eviction responseKind %+v", sub.ResponseKind)
		}
	}
	for _, want := range []string{"status", "log", "exec", "eviction", "binding", "ephemeralcontainers"} {
		if !slices.Contains(subs, want) {
			t.Fatalf("pods subresources %v lack %s", subs, want)
		}
	}
	if etag == "" {
		t.Fatal("no ETag on /api")
	}
	if resp, _ := get("/api", acceptAggregatedV2, etag); resp.StatusCode != http.StatusNotModified {
		t.Fatalf("GET /api with its ETag: %s, want 304", resp.Status)
	}
	if resp, body := get("/api", "application/json", ""); resp.StatusCode != http.StatusOK || !json.Valid(body) || !strings.Contains(string(body), `"kind":"APIVersions"`) {
		t.Fatalf("legacy /api: %s %s", resp.Status, body)
	}

	groups, apisETag := aggregated("/apis")
	apps := findGroup(groups, "apps")
	if apps == nil || apps.Versions[0].Version != "v1" || findResource(apps.Versions[0], "deployments") == nil {
		t.Fatalf("/apis apps: %+v", apps)
	}
	autoscaling := findGroup(groups, "autoscaling")
	if autoscaling == nil || autoscaling.Versions[0].Version != "v2" {
		t.Fatalf("/apis autoscaling: preferred version first, got %+v", autoscaling)
	}

	gv := schema.GroupVersion{Group: "example.com", Version: "v1"}
	env.srv.SetResources("widgets.example.com", []*registry.Resource{{
		GroupVersion: gv, Name: "widgets", Kind: "Widget", ListKind: "WidgetList", Namespaced: true,
		Verbs: []string{"get", "list", "create"}, Subresources: []string{"status"},
		New: func() runtime.Object { return nil }, NewList: func() runtime.Object { return nil },
	}})
	groups, newETag := aggregated("/apis")
	if newETag == apisETag {
		t.Fatal("the ETag of /apis did not change with a new group")
	}
	example := findGroup(groups, "example.com")
	if example == nil || findResource(example.Versions[0], "widgets") == nil {
		t.Fatalf("/apis after SetResources: no widgets in %+v", example)
	}
	// client-go's discovery reads the aggregated form and finds it too.
	_, lists, err := env.clientset(t).Discovery().ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, l := range lists {
		if l.GroupVersion == "example.com/v1" && len(l.APIResources) == 2 {
			found = true
		}
	}
	if !found {
		t.Fatal("client-go discovery does not list example.com/v1 widgets and widgets/status")
	}
	env.srv.SetResources("widgets.example.com", nil)
	if groups, _ = aggregated("/apis"); findGroup(groups, "example.com") != nil {
		t.Fatal("example.com still listed after its owner removed it")
	}
}

func findGroup(list apidiscoveryv2.APIGroupDiscoveryList, name string) *apidiscoveryv2.APIGroupDiscovery {
	for i := range list.Items {
		if list.Items[i].Name == name {
			return &list.Items[i]
		}
	}
	return nil
}

func findResource(v apidiscoveryv2.APIVersionDiscovery, name string) *apidiscoveryv2.APIResourceDiscovery {
	for i := range v.Resources {
		if v.Resources[i].Resource == name {
			return &v.Resources[i]
		}
	}
	return nil
}
