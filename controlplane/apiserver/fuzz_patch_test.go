package apiserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime/metrics"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cbor "k8s.io/apimachinery/pkg/runtime/serializer/cbor/direct"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kube-openapi/pkg/cached"

	"github.com/nodelet/nodelet/controlplane/registry"
)

// patchTarget is one stored object FuzzPatch patches.
type patchTarget struct {
	path string // the object's URL path
	body string // its JSON as created, and as restored after a patch
}

var patchTargets = []patchTarget{
	{"/api/v1/namespaces/default/pods/p", `{"metadata":{"name":"p","labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"i","ports":[{"containerPort":80}]}]}}`},
	// 64 KiB of data: the copy bombs below double it.
	{"/api/v1/namespaces/default/configmaps/cm", `{"metadata":{"name":"cm"},"data":{"k":"` + strings.Repeat("x", 64<<10) + `"}}`},
	{"/apis/apps/v1/namespaces/default/deployments/d", `{"metadata":{"name":"d"},"spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"i"}]}}}}`},
	{"/apis/example.com/v1/namespaces/default/gadgets/g", `{"apiVersion":"example.com/v1","kind":"Gadget","metadata":{"name":"g"},"spec":{"size":1,"parts":[{"name":"a"}]}}`},
}

var patchTypes = []types.PatchType{types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType,
	types.ApplyYAMLPatchType, types.ApplyCBORPatchType}

// patchBombs are the patches of patch_limits_test.go: copies that double
// the configmap's 64 KiB forty times, and (as FuzzPatch's head, unit,
// repeat and tail) one operation more than a JSON patch may have.
func patchBombs() (copies string, head, unit string, repeat uint16, tail string) {
	ops := []string{`{"op":"add","path":"/metadata/annotations","value":{}}`,
		`{"op":"copy","from":"/data","path":"/metadata/annotations/d0"}`}
	for i := 1; i < 40; i++ {
		ops = append(ops, fmt.Sprintf(`{"op":"copy","from":"/metadata/annotations","path":"/metadata/annotations/d%d"}`, i))
	}
	test := `{"op":"test","path":"/metadata/name","value":"cm"}`
	return "[" + strings.Join(ops, ",") + "]", "[", test + ",", maxJSONPatchOperations, test + "]"
}

// maxFuzzPatchBytes bounds a patch FuzzPatch sends: past the body limit,
// so that the 413 is met too.
const maxFuzzPatchBytes = DefaultMaxBodyBytes + 1<<10

// Bounds on one patch. A patch result may hold the object, the patch
// (each byte escaped to at most six, as \u00XX) and what JSON patch
// copies may add. The answer adds defaults and managedFields, at most a
// constant factor more. The bytes one request allocates in all (not the
// heap it keeps) grow with the object and the patch, within a fixed
// budget beyond: the bombs stay far below it.
func patchResultBound(cur, patch int) int { return cur + 6*patch + maxJSONPatchCopyBytes }
func patchAnswerBound(cur, patch int) int { return 32*patchResultBound(cur, patch) + 64<<10 }
func patchAllocBound(cur, patch int) uint64 {
	return 256<<20 + 64*uint64(patchResultBound(cur, patch))
}

// FuzzPatch applies arbitrary JSON, merge, strategic merge and apply
// (YAML and CBOR) patches to a pod, a configmap (of 64 KiB), a deployment
// and a custom resource, through applyPatch and through the real PATCH
// handler and storage: nothing panics, each refusal is a deliberate
// Kubernetes Status (4xx; a failed apply merge may be upstream's bare
// 500), results stay within the bounds above, and so does what a request
// allocates. Written patches are undone so that every input meets the
// same objects.
func FuzzPatch(f *testing.F) {
	copies, head, unit, repeat, tail := patchBombs()
	f.Add(uint8(1), uint8(0), true, []byte(copies), []byte(nil), uint16(0), []byte(nil))
	f.Add(uint8(1), uint8(0), false, []byte(head), []byte(unit), repeat, []byte(tail))
	for _, s := range []struct {
		target, kind uint8
		write        bool
		patch        string
	}{
		{0, 0, true, `[{"op":"add","path":"/metadata/labels/x","value":"y"},{"op":"move","from":"/spec/containers/0","path":"/spec/containers/-"}]`},
		{0, 0, false, `[{"op":"copy","from":"/spec","path":"/metadata/annotations"}]`},
		{0, 1, true, `{"metadata":{"labels":{"a":null,"x":"y"}},"spec":{"activeDeadlineSeconds":5}}`},
		{0, 2, true, `{"spec":{"containers":[{"name":"c","image":"j"},{"name":"d","image":"i"}],"$setElementOrder/containers":[{"name":"d"},{"name":"c"}]}}`},
		{0, 2, false, `{"spec":{"containers":[{"name":"c","$patch":"delete"}]}}`},
		{0, 2, false, `{"metadata":{"$retainKeys":["name"],"labels":{"$patch":"replace"}}}`},
		{2, 2, true, `{"spec":{"replicas":3,"template":{"spec":{"$deleteFromPrimitiveList/containers":["x"]}}}}`},
		{2, 1, false, `{"spec":{"replicas":-1}}`},
		{2, 3, true, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {replicas: 2}\n"},
		{3, 1, true, `{"spec":{"size":2,"parts":null}}`},
		{3, 0, false, `[{"op":"replace","path":"/spec/parts/0/name","value":"b"}]`},
		{3, 2, false, `{"spec":{"size":3}}`},
		{3, 3, true, ""},
		{3, 3, false, "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g}\nspec: {size: 2}\n"},
	} {
		f.Add(s.target, s.kind, s.write, []byte(s.patch), []byte(nil), uint16(0), []byte(nil))
	}
	// Nesting a thousand deep, and a pod of many containers.
	f.Add(uint8(1), uint8(1), false, []byte(`{"data":`), []byte(`{"a":`), uint16(1000), []byte("1"+strings.Repeat("}", 1001)))
	f.Add(uint8(0), uint8(2), true, []byte(`{"spec":{"containers":[`), []byte(`{"name":"c","image":"i"},`), uint16(2000), []byte(`{"name":"z","image":"i"}]}}`))
	applied, err := cbor.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "cm"}, "data": map[string]any{"k": "v"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint8(1), uint8(4), true, applied, []byte(nil), uint16(0), []byte(nil))
	srv := newFuzzServer(f)
	serveGadgets(f, srv)
	h := srv.Handler()
	for _, tg := range patchTargets {
		collection := tg.path[:strings.LastIndex(tg.path, "/")]
		if rec := fuzzServe(h, "POST", collection, "application/json", []byte(tg.body)); rec.Code != http.StatusCreated {
			f.Fatalf("create %s: HTTP %d: %s", tg.path, rec.Code, rec.Body.String())
		}
	}
	allocs := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	allocated := func() uint64 { metrics.Read(allocs); return allocs[0].Value.Uint64() }

	// A patch is head, unit repeated and tail: large patches (the
	// operation bomb, deep nesting) from small inputs, which the fuzzer
	// mutates and minimizes quickly.
	f.Fuzz(func(t *testing.T, target, kind uint8, write bool, head, unit []byte, repeat uint16, tail []byte) {
		if len(unit) > 0 && len(unit)*int(repeat) > maxFuzzPatchBytes {
			repeat = uint16(maxFuzzPatchBytes / len(unit))
		}
		patch := slices.Concat(head, bytes.Repeat(unit, int(repeat)), tail)
		tg := patchTargets[int(target)%len(patchTargets)]
		pt := patchTypes[int(kind)%len(patchTypes)]
		what := fmt.Sprintf("%s %s %.200q", pt, tg.path, patch)
		cur := fuzzServe(h, "GET", tg.path, "", nil)
		if cur.Code != http.StatusOK {
			t.Fatalf("get %s: HTTP %d: %s", tg.path, cur.Code, cur.Body.String())
		}
		if pt == types.JSONPatchType || pt == types.MergePatchType || pt == types.StrategicMergePatchType {
			checkApplyPatch(t, what, srv, tg.path, pt, cur.Body.Bytes(), patch)
		}

		q := "?fieldManager=fuzz"
		if pt == types.ApplyYAMLPatchType || pt == types.ApplyCBORPatchType {
			q += "&force=true"
		}
		if !write {
			q += "&dryRun=All"
		}
		before := allocated()
		rec := fuzzServe(h, "PATCH", tg.path+q, string(pt), patch)
		if spent := allocated() - before; spent > patchAllocBound(cur.Body.Len(), len(patch)) {
			t.Fatalf("%s: allocated %d MiB", what, spent>>20)
		}
		if rec.Code == http.StatusInternalServerError && (pt == types.ApplyYAMLPatchType || pt == types.ApplyCBORPatchType) {
			// Upstream answers a merge the schema refuses with a bare
			// 500 (applyError); a panic or internal error has a reason.
			var st metav1.Status
			if json.Unmarshal(rec.Body.Bytes(), &st) == nil && st.Kind == "Status" && st.Reason == "" && st.Message != "" {
				return
			}
		}
		checkRefusal(t, what, rec)
		if rec.Code != http.StatusOK && rec.Code != http.StatusCreated {
			return
		}
		if n := rec.Body.Len(); n > patchAnswerBound(cur.Body.Len(), len(patch)) {
			t.Fatalf("%s: answered %d bytes for an object of %d", what, n, cur.Body.Len())
		}
		var got metav1.PartialObjectMetadata
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || got.Name != tg.path[strings.LastIndex(tg.path, "/")+1:] {
			t.Fatalf("%s: answered %v, %.300s", what, err, rec.Body.String())
		}
		if write {
			restore(t, h, tg)
		}
	})
}

// checkApplyPatch applies patch to cur with applyPatch, as the handler
// does: a refusal is a 4xx API error; a result stays within its bound.
func checkApplyPatch(t *testing.T, what string, srv *Server, path string, pt types.PatchType, cur, patch []byte) {
	t.Helper()
	info, ok := parseResourcePath("PATCH", path, nil, srv.lookup)
	if !ok || info.Resource == nil {
		t.Fatalf("%s: not a resource path", path)
	}
	out, err := applyPatch(string(pt), cur, patch, info.Resource.New())
	if err != nil {
		var status apierrors.APIStatus
		if !errors.As(err, &status) || status.Status().Code < 400 || status.Status().Code >= 500 {
			t.Fatalf("%s: applyPatch refused with %v (%T)", what, err, err)
		}
		return
	}
	if len(out) > patchResultBound(len(cur), len(patch)) {
		t.Fatalf("%s: applyPatch made %d bytes of %d", what, len(out), len(cur))
	}
}

// restore puts tg's object back as it was created, so that the next
// input patches the same object: a patch may have made it one that no
// update can bring back (a pod's activeDeadlineSeconds), so it is
// deleted (its finalizers first) and created anew.
func restore(t *testing.T, h http.Handler, tg patchTarget) {
	t.Helper()
	fuzzServe(h, "PATCH", tg.path, string(types.MergePatchType), []byte(`{"metadata":{"finalizers":null}}`))
	if rec := fuzzServe(h, "DELETE", tg.path+"?gracePeriodSeconds=0", "", nil); rec.Code != http.StatusOK {
		t.Fatalf("restore %s: delete: HTTP %d: %s", tg.path, rec.Code, rec.Body.String())
	}
	collection := tg.path[:strings.LastIndex(tg.path, "/")]
	if rec := fuzzServe(h, "POST", collection, "application/json", []byte(tg.body)); rec.Code != http.StatusCreated {
		t.Fatalf("restore %s: create: HTTP %d: %s", tg.path, rec.Code, rec.Body.String())
	}
}

// serveGadgets serves gadgets (crd_test.go), as the crds component serves
// a CRD's resources: with the OpenAPI document server-side apply reads,
// built by upstream's builder from a CRD of any spec.
func serveGadgets(f *testing.F, srv *Server) {
	preserve := true
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gadgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "GadgetList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", XPreserveUnknownFields: &preserve},
					},
				}},
			}},
		},
	}
	doc, err := builder.BuildOpenAPIV3(crd, "v1", builder.Options{V2: false})
	if err != nil {
		f.Fatal(err)
	}
	srv.OpenAPI().UpdateGroupVersion("apis/example.com/v1", cached.Static(doc, "gadgets"))
	srv.SetResources(crd.Name, []*registry.Resource{gadgets()})
}
