package apiserver

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// systemNamespaces exist in every cluster.
var systemNamespaces = []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease}

// ensureDefaults creates the objects every cluster has, if missing.
func (s *Server) ensureDefaults(ctx context.Context) error {
	res := s.Resource("", "namespaces")
	if res == nil {
		return nil
	}
	for _, name := range systemNamespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		setTypeMeta(res, ns)
		if _, err := s.create(ctx, res, ns, false); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", name, err)
		}
	}
	return nil
}
