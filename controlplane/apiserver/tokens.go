package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"

	"github.com/nodelet/nodelet/controlplane/registry"
	"github.com/nodelet/nodelet/controlplane/storage"
)

// TokenIssuer signs ServiceAccount tokens (satoken.Issuer) and serves the
// issuer's discovery documents.
type TokenIssuer interface {
	Issue(ctx context.Context, sa *corev1.ServiceAccount, pod *corev1.Pod, secret *corev1.Secret, node *corev1.Node,
		expirationSeconds int64, audiences []string) (string, time.Time, error)
	Audiences() []string
	OpenIDConfiguration() []byte
	JWKS() []byte
}

// BoundObjects is what a token request binds its token to.
type BoundObjects struct {
	Pod    *corev1.Pod
	Secret *corev1.Secret
	Node   *corev1.Node
}

// The issuer's discovery documents, where upstream serves them.
const (
	openIDConfigPath = "/.well-known/openid-configuration"
	jwksPath         = "/openid/v1/jwks"
)

// writeRawJSON writes an already encoded JSON document.
func writeRawJSON(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(body)
}

// serveTokenRequest answers serviceaccounts/token (kubectl create token):
// a token for the account, bound to a pod, secret or node of the request's
// choosing, which must exist (with the uid given, if any).
func (s *Server) serveTokenRequest(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	gr := groupResource(info.Resource)
	if info.Verb != "create" || s.cfg.Tokens == nil {
		return apierrors.NewMethodNotSupported(gr, info.Verb)
	}
	ctx := r.Context()
	obj, _, err := s.getObject(ctx, info.Resource, info.Namespace, info.Name)
	if err != nil {
		return err
	}
	sa := obj.(*corev1.ServiceAccount)
	directive, err := fieldValidation(r)
	if err != nil {
		return err
	}
	req := &authenticationv1.TokenRequest{}
	warnings, err := s.decodeBody(r, req, directive)
	if err != nil && !isEmptyBody(err) {
		return err
	}
	addWarnings(w, warnings)
	// Mutating admission sees the request as sent, validating admission
	// as defaulted, as upstream's handler and TokenREST order them:
	// NodeRestriction admits a node's request only for a pod bound to it,
	// and only for an audience that pod's volumes name ("" the API's).
	adm := admissionRequest{res: info.Resource, sub: "token", op: admission.Create,
		kind: authenticationv1.SchemeGroupVersion.WithKind("TokenRequest"), ns: info.Namespace, name: info.Name, obj: req,
		opts: &metav1.CreateOptions{}, dryRun: isDryRun(r)}
	if err := s.admit(ctx, adm); err != nil {
		return err
	}
	if len(req.Spec.Audiences) == 0 {
		req.Spec.Audiences = s.cfg.Tokens.Audiences()
	}
	if errs := s.validator.TokenRequest(req); len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: authenticationv1.GroupName, Kind: "TokenRequest"}, sa.Name, errs)
	}
	if err := s.validateAdmission(ctx, adm); err != nil {
		return err
	}
	bound, err := s.boundObjects(ctx, info.Namespace, req.Spec.BoundObjectRef)
	if err != nil {
		return err
	}
	// A token lives with its pod only for the account the pod runs as.
	if bound.Pod != nil && bound.Pod.Spec.ServiceAccountName != sa.Name {
		return apierrors.NewBadRequest(fmt.Sprintf("cannot bind token for serviceaccount %q to pod running with different serviceaccount name.", sa.Name))
	}
	token, exp, err := s.cfg.Tokens.Issue(ctx, sa, bound.Pod, bound.Secret, bound.Node, *req.Spec.ExpirationSeconds, req.Spec.Audiences)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	req.Name, req.Namespace, req.CreationTimestamp = sa.Name, sa.Namespace, metav1.Now()
	req.Status = authenticationv1.TokenRequestStatus{Token: token, ExpirationTimestamp: metav1.NewTime(exp)}
	req.TypeMeta = metav1.TypeMeta{APIVersion: authenticationv1.SchemeGroupVersion.String(), Kind: "TokenRequest"}
	writeJSON(w, http.StatusCreated, req)
	return nil
}

// boundObjects reads what ref names (nothing for nil): a Pod or Secret of
// the namespace, or a Node, with the uid given if any. A pod's node is
// recorded too, as upstream does. A missing object is a 404, another uid
// a 409.
func (s *Server) boundObjects(ctx context.Context, ns string, ref *authenticationv1.BoundObjectReference) (BoundObjects, error) {
	var b BoundObjects
	if ref == nil {
		return b, nil
	}
	var obj runtime.Object
	var err error
	switch ref.Kind {
	case "Pod":
		obj, _, err = s.getObject(ctx, s.Resource("", "pods"), ns, ref.Name)
		if err == nil {
			b.Pod = obj.(*corev1.Pod)
			if b.Pod.Spec.NodeName != "" {
				if n, _, nerr := s.getObject(ctx, s.Resource("", "nodes"), "", b.Pod.Spec.NodeName); nerr == nil {
					b.Node = n.(*corev1.Node)
				}
			}
		}
	case "Secret":
		obj, _, err = s.getObject(ctx, s.Resource("", "secrets"), ns, ref.Name)
		if err == nil {
			b.Secret = obj.(*corev1.Secret)
		}
	case "Node":
		obj, _, err = s.getObject(ctx, s.Resource("", "nodes"), "", ref.Name)
		if err == nil {
			b.Node = obj.(*corev1.Node)
		}
	default:
		return b, apierrors.NewBadRequest(fmt.Sprintf("cannot bind token to object of type %s", ref.Kind))
	}
	if err != nil {
		return b, err
	}
	if ref.UID != "" && accessor(obj).GetUID() != ref.UID {
		return b, apierrors.NewConflict(schema.GroupResource{Resource: ref.Kind}, ref.Name,
			fmt.Errorf("the UID in the bound object reference (%s) does not match the UID in record (%s); the object might have been deleted and then recreated",
				ref.UID, accessor(obj).GetUID()))
	}
	return b, nil
}

// ObjectGetter reads the objects a ServiceAccount token names straight
// from storage (upstream's ServiceAccountTokenGetter), for the token
// authenticator, which is built before the Server it authenticates for.
type ObjectGetter struct {
	store storage.Store
	codec objectCodec
	res   map[schema.GroupResource]*registry.Resource
}

// NewObjectGetter reads store, whose objects are resources'.
func NewObjectGetter(store storage.Store, resources []*registry.Resource) (*ObjectGetter, error) {
	proto, err := newProtobufSerializer()
	if err != nil {
		return nil, err
	}
	g := &ObjectGetter{store: store, codec: objectCodec{proto: proto}, res: map[schema.GroupResource]*registry.Resource{}}
	for _, r := range resources {
		if r.Stored == nil {
			g.res[schema.GroupResource{Group: r.GroupVersion.Group, Resource: r.Name}] = r
		}
	}
	return g, nil
}

func (g *ObjectGetter) get(ctx context.Context, resource, ns, name string) (runtime.Object, error) {
	res := g.res[schema.GroupResource{Resource: resource}]
	if res == nil {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: resource}, name)
	}
	kv, err := g.store.Get(ctx, objectKey(res, ns, name))
	if err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			return nil, apierrors.NewNotFound(groupResource(res), name)
		}
		return nil, err
	}
	return g.codec.decode(res, kv)
}

func (g *ObjectGetter) GetServiceAccount(ctx context.Context, ns, name string) (*corev1.ServiceAccount, error) {
	obj, err := g.get(ctx, "serviceaccounts", ns, name)
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.ServiceAccount), nil
}

func (g *ObjectGetter) GetPod(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	obj, err := g.get(ctx, "pods", ns, name)
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.Pod), nil
}

func (g *ObjectGetter) GetSecret(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	obj, err := g.get(ctx, "secrets", ns, name)
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.Secret), nil
}

func (g *ObjectGetter) GetNode(ctx context.Context, name string) (*corev1.Node, error) {
	obj, err := g.get(ctx, "nodes", "", name)
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.Node), nil
}

// Webhook configurations are not served yet: tokens bound to them do not
// exist.
func (g *ObjectGetter) GetValidatingWebhookConfiguration(_ context.Context, name string) (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	return nil, apierrors.NewNotFound(admissionregistrationv1.Resource("validatingwebhookconfigurations"), name)
}

func (g *ObjectGetter) GetMutatingWebhookConfiguration(_ context.Context, name string) (*admissionregistrationv1.MutatingWebhookConfiguration, error) {
	return nil, apierrors.NewNotFound(admissionregistrationv1.Resource("mutatingwebhookconfigurations"), name)
}
