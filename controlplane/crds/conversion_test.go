package crds

import (
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/conversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestWebhookConversion converts between a CRD's versions through its
// conversion webhook (upstream's converter, a ConversionReview to a URL).
func TestWebhookConversion(t *testing.T) {
	hook := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		review := &apiextensionsv1.ConversionReview{}
		if err := json.NewDecoder(r.Body).Decode(review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		resp := &apiextensionsv1.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
		for _, raw := range review.Request.Objects {
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(raw.Raw); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			// v1 spec.size is v2 spec.count.
			if review.Request.DesiredAPIVersion == "example.com/v2" {
				size, _, _ := unstructured.NestedInt64(u.Object, "spec", "size")
				unstructured.RemoveNestedField(u.Object, "spec", "size")
				_ = unstructured.SetNestedField(u.Object, size, "spec", "count")
			} else {
				count, _, _ := unstructured.NestedInt64(u.Object, "spec", "count")
				unstructured.RemoveNestedField(u.Object, "spec", "count")
				_ = unstructured.SetNestedField(u.Object, count, "spec", "size")
			}
			u.SetAPIVersion(review.Request.DesiredAPIVersion)
			data, _ := u.MarshalJSON()
			resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: data})
		}
		review.Response, review.Request = resp, nil
		_ = json.NewEncoder(w).Encode(review)
	}))
	defer hook.Close()
	url := hook.URL + "/convert"
	caBundle := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hook.Certificate().Raw})

	preserve := &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptrTrue()}}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com", UID: "u1"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true, Schema: preserve},
				{Name: "v2", Served: true, Schema: preserve},
			},
			Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
				Webhook: &apiextensionsv1.WebhookConversion{ConversionReviewVersions: []string{"v1"},
					ClientConfig: &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: caBundle}}},
		},
	}
	crd.Status.AcceptedNames = crd.Spec.Names
	converters, err := conversion.NewCRConverterFactory(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := resources(crd, false, converters)
	if err != nil {
		t.Fatal(err)
	}
	v2 := rs[1]
	if v2.GroupVersion.Version != "v2" || v2.Stored != rs[0] {
		t.Fatalf("v2 = %+v", v2)
	}
	stored := widget(t, "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: a, namespace: ns}\nspec: {size: 4}\n")
	out := v2.New()
	if err := v2.Convert(stored, out); err != nil {
		t.Fatalf("convert to v2: %v", err)
	}
	u := out.(*unstructured.Unstructured)
	if count, _, _ := unstructured.NestedInt64(u.Object, "spec", "count"); u.GetAPIVersion() != "example.com/v2" || count != 4 {
		t.Fatalf("converted to v2: %v", u.Object)
	}
	back := rs[0].New()
	if err := v2.Convert(u, back); err != nil {
		t.Fatalf("convert back to v1: %v", err)
	}
	if size, _, _ := unstructured.NestedInt64(back.(*unstructured.Unstructured).Object, "spec", "size"); size != 4 {
		t.Fatalf("converted back: %v", back)
	}
}

func ptrTrue() *bool { b := true; return &b }
