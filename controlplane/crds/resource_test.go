package crds

import (
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/conversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/nodelet/nodelet/controlplane/registry"
)

const widgetsCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    selectableFields:
    - jsonPath: .spec.color
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - {rule: "self.size <= self.maxSize", message: "size must not exceed maxSize"}
            properties:
              size: {type: integer, default: 1}
              maxSize: {type: integer, default: 10}
              color: {type: string, enum: [red, green], default: green}
          status:
            type: object
            properties:
              phase: {type: string}
  - name: v1beta1
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`

func widgetResources(t *testing.T, terminating bool) (v1, v1beta1 *registry.Resource) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict([]byte(widgetsCRD), crd); err != nil {
		t.Fatal(err)
	}
	crd.Status.AcceptedNames = crd.Spec.Names
	converters, err := conversion.NewCRConverterFactory(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := resources(crd, terminating, converters)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 {
		t.Fatalf("resources = %d, want one per served version", len(rs))
	}
	return rs[0], rs[1]
}

func widget(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	// As a request body is decoded: JSON numbers become int64.
	j, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestResourcesPerVersion(t *testing.T) {
	v1, beta := widgetResources(t, false)
	if v1.Stored != nil || beta.Stored != v1 || beta.Convert == nil {
		t.Errorf("v1 stored as %v, v1beta1 as %v; want v1beta1 stored as v1", v1.Stored, beta.Stored)
	}
	if !v1.Namespaced || v1.Kind != "Widget" || v1.ListKind != "WidgetList" || !v1.HasSubresource("status") || beta.HasSubresource("status") {
		t.Errorf("v1 = %+v", v1)
	}
	if got := v1.New().GetObjectKind().GroupVersionKind().String(); got != "example.com/v1, Kind=Widget" {
		t.Errorf("New kind = %s", got)
	}
	in := widget(t, "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: a}\nspec: {size: 2}\n")
	out := beta.New()
	if err := beta.Convert(in, out); err != nil {
		t.Fatal(err)
	}
	if u := out.(*unstructured.Unstructured); u.GetAPIVersion() != "example.com/v1beta1" || u.GetName() != "a" {
		t.Errorf("converted = %v", u.Object)
	}
	_, terminating := widgetResources(t, true)
	for _, v := range terminating.Verbs {
		if v == "create" {
			t.Errorf("a terminating CRD's resource lists create")
		}
	}
}

func TestDefaultsPruneAndValidate(t *testing.T) {
	v1, _ := widgetResources(t, false)
	u := widget(t, "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: a, namespace: ns}\nspec: {size: 2, bogus: 1}\nextra: 1\n")
	unknown := v1.DropUnknown(u.DeepCopy())
	if strings.Join(unknown, ",") != "extra,spec.bogus" && strings.Join(unknown, ",") != "spec.bogus,extra" {
		t.Errorf("unknown fields = %v", unknown)
	}
	v1.Default(u)
	spec := u.Object["spec"].(map[string]interface{})
	if _, ok := spec["bogus"]; ok || u.Object["extra"] != nil {
		t.Errorf("unknown fields kept: %v", u.Object)
	}
	if spec["color"] != "green" || spec["maxSize"] != int64(10) {
		t.Errorf("defaults not applied: %v", spec)
	}
	if errs := v1.Validate(u); len(errs) != 0 {
		t.Errorf("valid widget: %v", errs)
	}

	bad := widget(t, "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: b, namespace: ns}\nspec: {size: 20, maxSize: 10, color: green}\n")
	errs := v1.Validate(bad)
	if len(errs) != 1 || errs[0].Field != "spec" || !strings.Contains(errs[0].Detail, "size must not exceed maxSize") {
		t.Errorf("CEL rule: errors %v", errs)
	}
	bad = widget(t, "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: b, namespace: ns}\nspec: {size: 1, maxSize: 10, color: purple}\n")
	if errs := v1.Validate(bad); len(errs) == 0 || errs[0].Field != "spec.color" || errs[0].Type != "FieldValueNotSupported" {
		t.Errorf("enum: errors %v", errs)
	}
}

func TestStatusSplitAndGeneration(t *testing.T) {
	v1, _ := widgetResources(t, false)
	old := widget(t, "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: a, namespace: ns, generation: 1}\nspec: {size: 2, maxSize: 10, color: green}\nstatus: {phase: Old}\n")
	created := old.DeepCopy()
	v1.PrepareForCreate(created)
	if _, ok := created.Object["status"]; ok {
		t.Errorf("status kept on create")
	}
	upd := old.DeepCopy()
	upd.Object["status"] = map[string]interface{}{"phase": "New"}
	v1.PrepareForUpdate(upd, old)
	if upd.Object["status"].(map[string]interface{})["phase"] != "Old" || v1.SpecChanged(upd, old) {
		t.Errorf("main update changed status: %v", upd.Object["status"])
	}
	st := old.DeepCopy()
	st.Object["status"] = map[string]interface{}{"phase": "New"}
	st.Object["spec"].(map[string]interface{})["size"] = int64(5)
	v1.PrepareForStatusUpdate(st, old)
	if st.Object["status"].(map[string]interface{})["phase"] != "New" || st.Object["spec"].(map[string]interface{})["size"] != int64(2) {
		t.Errorf("status update: %v", st.Object)
	}
	changed := old.DeepCopy()
	changed.Object["spec"].(map[string]interface{})["size"] = int64(3)
	if !v1.SpecChanged(changed, old) {
		t.Errorf("a spec change is not a new generation")
	}
}

func TestTableAndFields(t *testing.T) {
	v1, beta := widgetResources(t, false)
	var names []string
	for _, c := range v1.Columns {
		names = append(names, c.Name)
	}
	if strings.Join(names, ",") != "Name,Size" {
		t.Errorf("columns = %v", names)
	}
	u := widget(t, "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: a, namespace: ns}\nspec: {size: 2, color: red}\n")
	u.SetCreationTimestamp(metav1.NewTime(time.Now().Add(-time.Hour)))
	if row := v1.Row(u, time.Now()); len(row) != 2 || row[0] != "a" || row[1] != int64(2) {
		t.Errorf("row = %#v", row)
	}
	if len(beta.Columns) != 2 || beta.Columns[1].Name != "Age" {
		t.Errorf("default columns = %v", beta.Columns)
	}
	if f := v1.Fields(u); f["spec.color"] != "red" {
		t.Errorf("selectable fields = %v", f)
	}
}
