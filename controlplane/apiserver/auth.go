package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/anonymous"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/union"
	"k8s.io/apiserver/pkg/authentication/token/tokenfile"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// Authentication and authorization speak k8s.io/apiserver's interfaces
// (authenticator.Request, user.Info, authorizer.Authorizer and its
// Attributes), as kube-apiserver's filters do, so that upstream's
// authenticators (token file, service-account JWTs, anonymous) and
// authorizers (RBAC, Node) plug in unchanged. The authenticated user rides
// in the request context (k8s.io/apiserver/pkg/endpoints/request.WithUser).

// CertAuthenticator maps a verified TLS client certificate to a user: the
// common name is the user, the organizations are the groups, as upstream's
// x509 CommonNameUserConversion. Upstream's x509 authenticator verifies the
// chain again on every request; here the TLS handshake has verified it
// against the cluster CA, the only client CA, once per connection.
type CertAuthenticator struct{}

func (CertAuthenticator) AuthenticateRequest(r *http.Request) (*authenticator.Response, bool, error) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return nil, false, nil
	}
	cert := r.TLS.VerifiedChains[0][0]
	if cert.Subject.CommonName == "" {
		return nil, false, errors.New("client certificate has no common name")
	}
	groups := append([]string(nil), cert.Subject.Organization...)
	return &authenticator.Response{User: &user.DefaultInfo{Name: cert.Subject.CommonName, Groups: groups}}, true, nil
}

// AuthnOptions choose the control plane's authenticators.
type AuthnOptions struct {
	// TokenFile is upstream's --token-auth-file: static bearer tokens,
	// token,user,uid,"group1,group2" per line ("": none).
	TokenFile string
	// ServiceAccountTokens, when set, authenticates ServiceAccount tokens
	// (satoken.Issuer).
	ServiceAccountTokens authenticator.Token
	// APIAudiences are the API server's audiences (upstream's
	// --api-audiences): the static tokens, which carry none, are taken
	// to be for them, as upstream wraps audience-agnostic authenticators.
	APIAudiences []string
	// BootstrapTokens, when set, authenticates bootstrap tokens
	// (controlplane/bootstraptoken).
	BootstrapTokens authenticator.Token
	// Anonymous is upstream's --anonymous-auth: a request with no
	// credentials is system:anonymous in system:unauthenticated (refused
	// with 403 by the authorizer rather than 401). Bad credentials are
	// still a 401.
	Anonymous bool
}

// NewAuthenticator is the control plane's authentication chain, in
// kube-apiserver's order: client certificates, the token file's bearer
// tokens, ServiceAccount tokens; every user they recognise is in
// system:authenticated; then, if enabled, anonymous.
func NewAuthenticator(opts AuthnOptions) (authenticator.Request, error) {
	chain := []authenticator.Request{CertAuthenticator{}}
	if opts.TokenFile != "" {
		tokens, err := tokenfile.NewCSV(opts.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("token file: %w", err)
		}
		chain = append(chain, bearertoken.New(authenticator.WrapAudienceAgnosticToken(opts.APIAudiences, tokens)))
	}
	if opts.ServiceAccountTokens != nil {
		chain = append(chain, bearertoken.New(opts.ServiceAccountTokens))
	}
	if opts.BootstrapTokens != nil {
		chain = append(chain, bearertoken.New(opts.BootstrapTokens))
	}
	authn := group.NewAuthenticatedGroupAdder(union.New(chain...))
	// Without --anonymous-auth, a request with no credentials may still
	// read cluster-info, as kube-apiserver's anonymous conditions allow:
	// a joining node's first request, before it trusts any CA.
	var conditions []apiserver.AnonymousAuthCondition
	if !opts.Anonymous {
		conditions = []apiserver.AnonymousAuthCondition{{Path: ClusterInfoPath}}
	}
	return union.NewFailOnError(authn, anonymous.NewAuthenticator(conditions)), nil
}

// ClusterInfoPath is kube-public's cluster-info ConfigMap, which anyone
// may read (RBAC grants system:anonymous get on it).
const ClusterInfoPath = "/api/v1/namespaces/kube-public/configmaps/cluster-info"

// AllowAuthenticated allows every authenticated user everything and
// anonymous users nothing: the authorizer until RBAC lands.
var AllowAuthenticated authorizer.Authorizer = authorizer.AuthorizerFunc(
	func(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		u := a.GetUser()
		if u == nil || slices.Contains(u.GetGroups(), user.AllUnauthenticated) {
			return authorizer.DecisionDeny, "anonymous requests are not allowed", nil
		}
		return authorizer.DecisionAllow, "", nil
	})

// errNoUser: a request reached a handler without an authenticated user,
// which the authentication step makes impossible.
var errNoUser = errors.New("no authenticated user in the request context")

// forbiddenMessage is upstream's wording of a refusal
// (k8s.io/apiserver/pkg/endpoints/handlers/responsewriters, unexported
// there): who cannot do what, where.
func forbiddenMessage(a authorizer.Attributes) string {
	name := ""
	if u := a.GetUser(); u != nil {
		name = u.GetName()
	}
	if !a.IsResourceRequest() {
		return fmt.Sprintf("User %q cannot %s path %q", name, a.GetVerb(), a.GetPath())
	}
	resource := a.GetResource()
	if sub := a.GetSubresource(); sub != "" {
		resource += "/" + sub
	}
	if ns := a.GetNamespace(); ns != "" {
		return fmt.Sprintf("User %q cannot %s resource %q in API group %q in the namespace %q", name, a.GetVerb(), resource, a.GetAPIGroup(), ns)
	}
	return fmt.Sprintf("User %q cannot %s resource %q in API group %q at the cluster scope", name, a.GetVerb(), resource, a.GetAPIGroup())
}
