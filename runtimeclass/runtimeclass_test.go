package runtimeclass

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	nodev1listers "k8s.io/client-go/listers/node/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// A pod without a class has the default handler; a class in the lister
// or, when the lister lags, in the API server gives its handler; a
// missing class is NotFound.
func TestHandler(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := indexer.Add(&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "cached"}, Handler: "crun"}); err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset(&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "fresh"}, Handler: "runc-alt"})
	r := New(nodev1listers.NewRuntimeClassLister(indexer), client.NodeV1().RuntimeClasses())
	pod := func(class *string) *corev1.Pod { return &corev1.Pod{Spec: corev1.PodSpec{RuntimeClassName: class}} }
	for _, tc := range []struct {
		class *string
		want  string
	}{{nil, ""}, {ptr.To(""), ""}, {ptr.To("cached"), "crun"}, {ptr.To("fresh"), "runc-alt"}} {
		got, err := r.Handler(context.Background(), pod(tc.class))
		if err != nil || got != tc.want {
			t.Errorf("class %v: handler %q, %v, want %q", tc.class, got, err, tc.want)
		}
	}
	if _, err := r.Handler(context.Background(), pod(ptr.To("missing"))); !apierrors.IsNotFound(err) {
		t.Errorf("missing class: %v, want NotFound", err)
	}
}
