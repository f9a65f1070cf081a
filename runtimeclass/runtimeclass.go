// Package runtimeclass resolves a pod's RuntimeClass to the handler the
// node's runtime runs it with, as kubelet's runtimeclass manager does: a
// pod without a class has the default handler (""); a pod whose class is
// missing cannot get a sandbox until the class exists.
package runtimeclass

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	nodev1client "k8s.io/client-go/kubernetes/typed/node/v1"
	nodev1listers "k8s.io/client-go/listers/node/v1"
)

// Resolver reads RuntimeClasses from an informer's lister, and from the
// API server when the lister lacks one: a class created just before its
// pod may not have reached the informer yet (the RuntimeClass admission
// plugin looks it up live for the same reason). Nodes may get, list and
// watch RuntimeClasses (upstream's NodeRules).
type Resolver struct {
	lister nodev1listers.RuntimeClassLister
	client nodev1client.RuntimeClassInterface
}

// New returns a Resolver; client may be nil (no live lookup).
func New(lister nodev1listers.RuntimeClassLister, client nodev1client.RuntimeClassInterface) *Resolver {
	return &Resolver{lister: lister, client: client}
}

// Handler returns the handler of pod's RuntimeClass, "" without one. A
// missing class is a NotFound error (apierrors.IsNotFound).
func (r *Resolver) Handler(ctx context.Context, pod *corev1.Pod) (string, error) {
	if pod.Spec.RuntimeClassName == nil || *pod.Spec.RuntimeClassName == "" {
		return "", nil
	}
	name := *pod.Spec.RuntimeClassName
	rc, err := r.lister.Get(name)
	if apierrors.IsNotFound(err) && r.client != nil {
		rc, err = r.live(ctx, name)
	}
	if err != nil {
		return "", fmt.Errorf("look up RuntimeClass %s: %w", name, err)
	}
	return rc.Handler, nil
}

func (r *Resolver) live(ctx context.Context, name string) (*nodev1.RuntimeClass, error) {
	return r.client.Get(ctx, name, metav1.GetOptions{})
}
