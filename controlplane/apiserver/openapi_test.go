package apiserver

import (
	"net/http"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/openapi3"
	"k8s.io/client-go/rest"
)

// TestOpenAPIThroughClientGo reads the documents as kubectl does: the v3
// discovery document and a group-version's document through client-go's
// openapi3 root, and the v2 document in protobuf.
func TestOpenAPIThroughClientGo(t *testing.T) {
	env := newMetricsEnv(t, testMetrics(), AllowAuthenticated)
	cs := env.clientset(t)

	root := openapi3.NewRoot(cs.Discovery().OpenAPIV3())
	gvs, err := root.GroupVersions()
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	for _, gv := range gvs {
		served[gv.String()] = true
	}
	for _, want := range []string{"v1", "apps/v1", "batch/v1", "rbac.authorization.k8s.io/v1", "metrics.k8s.io/v1beta1"} {
		if !served[want] {
			t.Fatalf("openapi v3 lacks %s: %v", want, gvs)
		}
	}
	doc, err := root.GVSpec(schema.GroupVersion{Group: "apps", Version: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	if s := doc.Components.Schemas["io.k8s.api.apps.v1.DeploymentSpec"]; s == nil || !strings.Contains(s.Properties["replicas"].Description, "Number of desired pods") {
		t.Fatalf("DeploymentSpec: %+v", s)
	}
	metrics, err := root.GVSpec(schema.GroupVersion{Group: "metrics.k8s.io", Version: "v1beta1"})
	if err != nil || metrics.Components.Schemas["io.k8s.metrics.pkg.apis.metrics.v1beta1.NodeMetrics"] == nil {
		t.Fatalf("metrics.k8s.io document: %v", err)
	}

	v2, err := cs.Discovery().OpenAPISchema()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range v2.GetDefinitions().GetAdditionalProperties() {
		if d.GetName() == "io.k8s.api.core.v1.Pod" {
			found = true
		}
	}
	if !found {
		t.Fatal("v2 lacks io.k8s.api.core.v1.Pod")
	}

	// An ETag the client has is answered 304.
	req, _ := http.NewRequest("GET", env.config.Host+"/openapi/v3/api/v1", nil)
	hc, err := rest.HTTPClientFor(env.config)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	etag := resp.Header.Get("Etag")
	req.Header.Set("If-None-Match", etag)
	resp, err = hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if etag == "" || resp.StatusCode != http.StatusNotModified {
		t.Fatalf("If-None-Match %q: %d", etag, resp.StatusCode)
	}
}
