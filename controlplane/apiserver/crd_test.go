package apiserver

import (
	"context"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/nodelet/nodelet/controlplane/registry"
	"github.com/nodelet/nodelet/controlplane/storage"
)

func testCRD(name string) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}}},
					},
				}},
			}},
		},
	}
}

// TestCRDStrategy checks upstream's strategy semantics for
// CustomResourceDefinitions: status reset on create and kept on update,
// storedVersions, generation, and upstream's validation (422).
func TestCRDStrategy(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	cs, err := apiextensionsclient.NewForConfig(env.config)
	if err != nil {
		t.Fatal(err)
	}
	crds := cs.ApiextensionsV1().CustomResourceDefinitions()
	ctx := context.Background()

	in := testCRD("widgets.example.com")
	in.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{{Type: "Established", Status: "True"}}
	got, err := crds.Create(ctx, in, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if len(got.Status.Conditions) != 0 || len(got.Status.StoredVersions) != 1 || got.Status.StoredVersions[0] != "v1" {
		t.Errorf("status after create = %+v, want no conditions and storedVersions [v1]", got.Status)
	}
	if got.Generation != 1 {
		t.Errorf("generation = %d, want 1", got.Generation)
	}
	if got.Spec.Conversion == nil || got.Spec.Conversion.Strategy != apiextensionsv1.NoneConverter {
		t.Errorf("conversion = %+v, want the default None", got.Spec.Conversion)
	}

	got.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{{Type: "Established", Status: "True", Reason: "InitialNamesAccepted", LastTransitionTime: metav1.Now()}}
	got.Spec.Names.ShortNames = []string{"ignored"}
	st, err := crds.UpdateStatus(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status: %v", err)
	}
	if len(st.Status.Conditions) != 1 || len(st.Spec.Names.ShortNames) != 0 || st.Generation != 1 {
		t.Errorf("after status update: conditions %v, shortNames %v, generation %d", st.Status.Conditions, st.Spec.Names.ShortNames, st.Generation)
	}

	st.Spec.Names.ShortNames = []string{"wd"}
	st.Status.Conditions = nil
	up, err := crds.Update(ctx, st, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if up.Generation != 2 || len(up.Status.Conditions) != 1 {
		t.Errorf("after update: generation %d, conditions %v; want 2 and the status kept", up.Generation, up.Status.Conditions)
	}

	bad := testCRD("wrong.example.com")
	_, err = crds.Create(ctx, bad, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("create with a name not plural.group: %v, want 422", err)
	}
	if want := `metadata.name: Invalid value: "wrong.example.com": must be spec.names.plural+"."+spec.group`; !containsCause(err, want) {
		t.Errorf("error %v does not say %q", err, want)
	}
}

func containsCause(err error, want string) bool {
	st, ok := err.(apierrors.APIStatus)
	if !ok || st.Status().Details == nil {
		return false
	}
	for _, c := range st.Status().Details.Causes {
		if c.Field+": "+c.Message == want {
			return true
		}
	}
	return false
}

// TestCRDWarnings checks upstream's CRD strategy warnings: an unknown
// format, once.
func TestCRDWarnings(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	var warnings []string
	cfg := *env.config
	cfg.WarningHandler = warningCollector(func(msg string) { warnings = append(warnings, msg) })
	cs, err := apiextensionsclient.NewForConfig(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	crd := testCRD("widgets.example.com")
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	spec.Properties["id"] = apiextensionsv1.JSONSchemaProps{Type: "string", Format: "no-such-format"}
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(context.Background(), crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || warnings[0] != `unrecognized format "no-such-format"` {
		t.Errorf("warnings = %q", warnings)
	}
}

type warningCollector func(string)

func (w warningCollector) HandleWarningHeader(_ int, _ string, msg string) { w(msg) }

// gadgets is a minimal custom resource: unstructured, no hooks.
func gadgets() *registry.Resource {
	gv := schema.GroupVersion{Group: "example.com", Version: "v1"}
	return &registry.Resource{GroupVersion: gv, Name: "gadgets", Kind: "Gadget", ListKind: "GadgetList", Namespaced: true,
		Verbs: []string{"create", "delete", "get", "list", "patch", "update", "watch"},
		New: func() runtime.Object {
			u := &unstructured.Unstructured{Object: map[string]interface{}{}}
			u.SetGroupVersionKind(gv.WithKind("Gadget"))
			return u
		},
		NewList: func() runtime.Object {
			l := &unstructured.UnstructuredList{Object: map[string]interface{}{}}
			l.SetGroupVersionKind(gv.WithKind("GadgetList"))
			return l
		}}
}

// TestCustomResourceWatchEndsWhenServedDifferently: a watch of a custom
// resource ends when its owner serves it anew (its CRD changed) or not at
// all, and goes on while other owners change the table.
func TestCustomResourceWatchEndsWhenServedDifferently(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	env.srv.SetResources("gadgets.example.com", []*registry.Resource{gadgets()})
	dyn, err := dynamic.NewForConfig(env.config)
	if err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gadgets"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, err := dyn.Resource(gvr).Namespace("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	g := gadgets().New().(*unstructured.Unstructured)
	g.SetName("g1")
	if _, err := dyn.Resource(gvr).Namespace("default").Create(ctx, g, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if ev := <-w.ResultChan(); ev.Type != watch.Added {
		t.Fatalf("first event %v", ev.Type)
	}
	env.srv.SetResources("other.example.com", nil) // another owner: this watch goes on
	g.SetName("g2")
	if _, err := dyn.Resource(gvr).Namespace("default").Create(ctx, g, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if ev := <-w.ResultChan(); ev.Type != watch.Added {
		t.Fatalf("after another owner's change: event %v", ev.Type)
	}
	env.srv.SetResources("gadgets.example.com", []*registry.Resource{gadgets()})
	select {
	case ev, ok := <-w.ResultChan():
		if ok {
			t.Fatalf("watch went on after its resource was served anew: %v", ev.Type)
		}
	case <-ctx.Done():
		t.Fatal("watch did not end")
	}
}
