package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/nodelet/nodelet/controlplane/registry"
)

// decodeTarget is a collection FuzzDecode creates in and the object
// ("x", created beforehand) it updates.
type decodeTarget struct {
	collection string
	seed       runtime.Object
}

var decodeFormats = []string{"application/json", "application/yaml", protobufType}

func decodeTargets() []decodeTarget {
	meta := metav1.ObjectMeta{Name: "x", Labels: map[string]string{"a": "b"}}
	containers := []corev1.Container{{Name: "c", Image: "i", Ports: []corev1.ContainerPort{{ContainerPort: 80}}}}
	replicas := int32(2)
	gadget := gadgets().New()
	_ = json.Unmarshal([]byte(`{"apiVersion":"example.com/v1","kind":"Gadget","metadata":{"name":"x"},"spec":{"size":1,"parts":[{"name":"a"}]}}`), gadget)
	return []decodeTarget{
		{"/api/v1/namespaces/default/configmaps", &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: meta, Data: map[string]string{"k": "v"}, BinaryData: map[string][]byte{"b": {0, 1}}}},
		{"/api/v1/namespaces/default/pods", &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: meta, Spec: corev1.PodSpec{Containers: containers}}},
		{"/apis/apps/v1/namespaces/default/deployments", &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: meta.Labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: meta.Labels}, Spec: corev1.PodSpec{Containers: containers}}}}},
		{"/apis/example.com/v1/namespaces/default/gadgets", gadget},
	}
}

// encodeSeed is obj in format.
func encodeSeed(f *testing.F, srv *Server, format string, obj runtime.Object) []byte {
	data, err := json.Marshal(obj)
	if err == nil && format == "application/yaml" {
		data, err = yaml.JSONToYAML(data)
	}
	if err == nil && format == protobufType {
		var buf bytes.Buffer
		err = srv.protobuf.Encode(obj, &buf)
		data = buf.Bytes()
	}
	if err != nil {
		f.Fatalf("encode %T as %s: %v", obj, format, err)
	}
	return data
}

// FuzzDecode sends arbitrary bodies in JSON, YAML and Kubernetes protobuf
// (the body formats served; CBOR is served only for apply, which
// FuzzPatch covers) to create and update a configmap, a pod, a
// deployment and a custom resource, through the real handlers and bolt:
// each answer is a success naming the kind, or a 4xx Status. Creates are
// written (and the object deleted after); updates are dry runs.
func FuzzDecode(f *testing.F) {
	srv := newFuzzServer(f)
	serveGadgets(f, srv)
	h := srv.Handler()
	targets := decodeTargets()
	for ti, tg := range targets {
		for fi, format := range decodeFormats {
			if format == protobufType && tg.seed.GetObjectKind().GroupVersionKind().Group == "example.com" {
				continue
			}
			body := encodeSeed(f, srv, format, tg.seed)
			f.Add(uint8(ti), uint8(fi), false, body)
			f.Add(uint8(ti), uint8(fi), true, body)
		}
		body := encodeSeed(f, srv, "application/json", tg.seed)
		if rec := fuzzServe(h, "POST", tg.collection, "application/json", body); rec.Code != http.StatusCreated {
			f.Fatalf("create in %s: HTTP %d: %s", tg.collection, rec.Code, rec.Body.String())
		}
	}
	f.Add(uint8(0), uint8(1), false, []byte("a: &a [*a, *a, *a]\nb: &b [*a, *a]\nmetadata: {name: x}\n"))
	f.Add(uint8(0), uint8(0), true, []byte(`{"metadata":{"name":"x","name":"y"},"data":{"k":1e999}}`))
	f.Add(uint8(1), uint8(2), false, []byte("k8s\x00\x0a\x0c\x0a\x02v1\x12\x06Secret\x12\x00"))

	f.Fuzz(func(t *testing.T, target, format uint8, update bool, body []byte) {
		tg := targets[int(target)%len(targets)]
		ctype := decodeFormats[int(format)%len(decodeFormats)]
		method, path, want := "POST", tg.collection, http.StatusCreated
		if update {
			method, path, want = "PUT", tg.collection+"/x?dryRun=All", http.StatusOK
		}
		what := fmt.Sprintf("%s %s (%s) %.300q", method, path, ctype, body)
		rec := fuzzServe(h, method, path, ctype, body)
		checkRefusal(t, what, rec)
		if rec.Code >= 400 {
			return
		}
		var got metav1.PartialObjectMetadata
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != want ||
			got.Kind != tg.seed.GetObjectKind().GroupVersionKind().Kind || got.Name == "" {
			t.Fatalf("%s: HTTP %d (%v): %.300s", what, rec.Code, err, rec.Body.String())
		}
		if !update {
			obj := tg.collection + "/" + url.PathEscape(got.Name)
			fuzzServe(h, "PATCH", obj, "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`))
			if rec := fuzzServe(h, "DELETE", obj+"?gracePeriodSeconds=0", "", nil); rec.Code != http.StatusOK {
				t.Fatalf("%s: delete %s: HTTP %d: %s", what, got.Name, rec.Code, rec.Body.String())
			}
		}
	})
}

// FuzzListQuery lists and watches with arbitrary resourceVersion,
// resourceVersionMatch, limit and continue parameters, and decodes
// continue tokens (base64 JSON the server parses) directly: nothing
// panics, a token decodeContinue accepts lies under the list's prefix and
// survives encoding again, and each answer is a 4xx Status (or
// upstream's 504 for a resourceVersion ahead of the store) or a list
// whose resourceVersion a client can watch from.
func FuzzListQuery(f *testing.F) {
	srv := newFuzzServer(f)
	h := srv.Handler()
	for i := range 5 {
		body := fmt.Sprintf(`{"metadata":{"name":"c%d"}}`, i)
		if rec := fuzzServe(h, "POST", "/api/v1/namespaces/default/configmaps", "application/json", []byte(body)); rec.Code != http.StatusCreated {
			f.Fatalf("create: HTTP %d: %s", rec.Code, rec.Body.String())
		}
	}
	var res *registry.Resource
	for _, r := range registry.All() {
		if r.GroupVersion.Group == "" && r.Name == "configmaps" {
			res = r
		}
	}
	prefix := listPrefix(res, "default")
	rev := srv.store.Revision()
	for _, s := range []struct {
		token, rv, match, limit string
		watch                   bool
	}{
		{encodeContinue(rev, prefix+"c1\x00"), "", "", "2", false},
		{encodeContinue(rev+100, prefix+"c3"), "", "", "1", false},
		{encodeContinue(-1, prefix), "", "", "1", false},
		{encodeContinue(0, prefix+"zz"), "0", "", "1", false},
		{encodeContinue(rev, "/secrets/default/"), "", "", "1", false},
		{"eyJydiI6MSwic3RhcnQiOjF9", "", "", "", false},
		{"", "1", "Exact", "1", false},
		{"", strconv.FormatInt(rev+10, 10), "NotOlderThan", "", false},
		{"", "-1", "", "-5", false},
		{"", "0", "", "", true},
		{"", "1", "", "", true},
		{"", strconv.FormatInt(rev, 10), "", "", true},
		{"", "99999999999999999999", "", "", true},
	} {
		f.Add(s.token, s.rv, s.match, s.limit, s.watch)
	}

	f.Fuzz(func(t *testing.T, token, rv, match, limit string, watch bool) {
		if tok, err := decodeContinue(token, prefix); err == nil {
			if !strings.HasPrefix(tok.Start, prefix) {
				t.Fatalf("token %q: accepted start %q outside %q", token, tok.Start, prefix)
			}
			if again, err := decodeContinue(encodeContinue(tok.Rev, tok.Start), prefix); err != nil || again != tok {
				t.Fatalf("token %q: %+v encoded again is %+v (%v)", token, tok, again, err)
			}
		}
		q := url.Values{}
		for k, v := range map[string]string{"continue": token, "resourceVersion": rv, "resourceVersionMatch": match, "limit": limit} {
			if v != "" {
				q.Set(k, v)
			}
		}
		if watch {
			q.Set("watch", "1")
		}
		what := "?" + q.Encode()
		req := httptest.NewRequest("GET", "https://localhost/api/v1/namespaces/default/configmaps?"+q.Encode(), nil)
		// A watch ends with its request.
		ctx, cancel := context.WithTimeout(req.Context(), 20*time.Millisecond)
		defer cancel()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req.WithContext(ctx))
		if rec.Code == http.StatusGatewayTimeout {
			var st metav1.Status
			if json.Unmarshal(rec.Body.Bytes(), &st) != nil || st.Details == nil || len(st.Details.Causes) == 0 ||
				st.Details.Causes[0].Type != metav1.CauseTypeResourceVersionTooLarge {
				t.Fatalf("%s: HTTP 504: %s", what, rec.Body.String())
			}
			return
		}
		checkRefusal(t, what, rec)
		if rec.Code >= 400 || watch {
			return
		}
		var list objectList
		if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil || rec.Code != http.StatusOK {
			t.Fatalf("%s: HTTP %d (%v): %.300s", what, rec.Code, err, rec.Body.String())
		}
		if n, err := strconv.ParseInt(list.Metadata.ResourceVersion, 10, 64); err != nil || n <= 0 {
			t.Fatalf("%s: listed at resourceVersion %q", what, list.Metadata.ResourceVersion)
		}
	})
}
