package bootstraptoken

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/kubernetes/plugin/pkg/auth/authenticator/token/bootstrap"
)

// SecretGetter reads a Secret from the store (apiserver.ObjectGetter).
type SecretGetter interface {
	GetSecret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
}

// Authenticator is upstream's bootstrap token authenticator: a token
// "ID.SECRET" matching kube-system's bootstrap-token-ID Secret, unexpired
// and marked for authentication, is user system:bootstrap:ID in
// system:bootstrappers and the Secret's extra groups. It reads the Secret
// from the store at each request (tokens are used once or twice by a
// joining node), so no informer keeps every Secret in memory.
func Authenticator(secrets SecretGetter) authenticator.Token {
	return bootstrap.NewTokenAuthenticator(storeLister{secrets})
}

// storeLister is the lister upstream's authenticator wants, over the
// store; the authenticator only calls Get.
type storeLister struct{ secrets SecretGetter }

var _ corev1listers.SecretNamespaceLister = storeLister{}

var errNoList = errors.New("bootstrap token secrets are read one at a time")

func (l storeLister) Get(name string) (*corev1.Secret, error) {
	return l.secrets.GetSecret(context.Background(), metav1.NamespaceSystem, name)
}

func (storeLister) List(labels.Selector) ([]*corev1.Secret, error) { return nil, errNoList }
