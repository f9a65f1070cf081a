package crds

import (
	"context"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/finalizer"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/client-go/dynamic"
)

// instanceClients satisfies upstream's finalizer.CRClientGetter with the
// loopback dynamic client: the CRD finalizer lists a terminating CRD's
// instances and deletes them namespace by namespace through the API
// server (which keeps serving a terminating CRD), where upstream's goes to
// its storage directly.
type instanceClients struct {
	dynamic dynamic.Interface
}

var _ finalizer.CRClientGetter = instanceClients{}

func (c instanceClients) GetCustomResourceListerCollectionDeleter(crd *apiextensionsv1.CustomResourceDefinition) (finalizer.ListerCollectionDeleter, error) {
	version := ""
	for _, v := range crd.Spec.Versions {
		if v.Served && (version == "" || v.Storage) {
			version = v.Name
		}
	}
	if version == "" || crd.Status.AcceptedNames.Plural == "" {
		return nil, fmt.Errorf("CustomResourceDefinition %s serves nothing", crd.Name)
	}
	gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: version, Resource: crd.Status.AcceptedNames.Plural}
	return instances{client: c.dynamic.Resource(gvr), namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped}, nil
}

type instances struct {
	client     dynamic.NamespaceableResourceInterface
	namespaced bool
}

func (i instances) NewList() runtime.Object { return &unstructured.UnstructuredList{} }

// List lists every instance, in all namespaces (the finalizer passes no options).
func (i instances) List(ctx context.Context, _ *metainternalversion.ListOptions) (runtime.Object, error) {
	list, err := i.client.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list instances: %w", err)
	}
	return list, nil
}

func (i instances) ConvertToTable(context.Context, runtime.Object, runtime.Object) (*metav1.Table, error) {
	return nil, fmt.Errorf("instances: tables are not served here")
}

// DeleteCollection deletes the instances of the context's namespace (all,
// for a cluster-scoped CRD).
func (i instances) DeleteCollection(ctx context.Context, _ rest.ValidateObjectFunc, _ *metav1.DeleteOptions, _ *metainternalversion.ListOptions) (runtime.Object, error) {
	var err error
	if ns, _ := genericapirequest.NamespaceFrom(ctx); i.namespaced && ns != "" {
		err = i.client.Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("delete instances in %s: %w", ns, err)
		}
	} else if err = i.client.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return nil, fmt.Errorf("delete instances: %w", err)
	}
	return &unstructured.UnstructuredList{}, nil
}
