package crds

import (
	"context"
	"log/slog"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/conversion"
	listers "k8s.io/apiextensions-apiserver/pkg/client/listers/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"github.com/nodelet/nodelet/controlplane/openapi"
	"github.com/nodelet/nodelet/controlplane/registry"
)

type fakeServer struct {
	sets      int
	set       *openapi.Set
	resources map[string][]*registry.Resource
	forgotten []schema.GroupVersion
}

func (f *fakeServer) SetResources(owner string, rs []*registry.Resource) {
	f.sets++
	f.resources[owner] = rs
}
func (f *fakeServer) OpenAPI() *openapi.Set              { return f.set }
func (f *fakeServer) ForgetTypes(gv schema.GroupVersion) { f.forgotten = append(f.forgotten, gv) }

// TestSyncServesAndForgets follows a CRD through sync: served with its
// OpenAPI documents once its names are accepted, gone with them after.
func TestSyncServesAndForgets(t *testing.T) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict([]byte(widgetsCRD), crd); err != nil {
		t.Fatal(err)
	}
	crd.Status.AcceptedNames = crd.Spec.Names
	crd.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{
		{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionTrue},
		{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue},
	}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := indexer.Add(crd); err != nil {
		t.Fatal(err)
	}
	converters, err := conversion.NewCRConverterFactory(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := &fakeServer{set: openapi.NewSet(), resources: map[string][]*registry.Resource{}}
	c := &Component{server: srv, log: slog.Default(), lister: listers.NewCustomResourceDefinitionLister(indexer),
		converters: converters, served: map[string][]schema.GroupVersion{}, servedAs: map[string]servedFrom{}, builtinDocs: map[string]bool{}}
	ctx := context.Background()

	if err := c.sync(ctx, crd.Name); err != nil {
		t.Fatal(err)
	}
	if len(srv.resources[crd.Name]) != 2 {
		t.Fatalf("served %d resources, want 2", len(srv.resources[crd.Name]))
	}
	doc, err := srv.set.Document("apis/example.com/v1")
	if err != nil {
		t.Fatalf("v3 document of example.com/v1: %v", err)
	}
	if _, ok := doc.Components.Schemas["com.example.v1.Widget"]; !ok {
		t.Errorf("no Widget schema in the v3 document")
	}
	if len(srv.forgotten) != 2 {
		t.Errorf("forgot %v, want both group-versions", srv.forgotten)
	}

	// A change of its status alone (here a condition) rebuilds nothing.
	changed := crd.DeepCopy()
	changed.ResourceVersion = "2"
	changed.Status.Conditions[1].Message = "again"
	if err := indexer.Update(changed); err != nil {
		t.Fatal(err)
	}
	if err := c.sync(ctx, crd.Name); err != nil {
		t.Fatal(err)
	}
	if srv.sets != 1 {
		t.Errorf("a status change served the CRD anew (%d sets)", srv.sets)
	}

	if err := indexer.Delete(crd); err != nil {
		t.Fatal(err)
	}
	if err := c.sync(ctx, crd.Name); err != nil {
		t.Fatal(err)
	}
	if srv.resources[crd.Name] != nil {
		t.Errorf("still served after deletion")
	}
	if _, err := srv.set.Document("apis/example.com/v1"); err == nil {
		t.Errorf("the v3 document outlived the CRD")
	}
}
