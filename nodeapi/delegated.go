package nodeapi

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/anonymous"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/union"
	"k8s.io/apiserver/pkg/authentication/request/websocket"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	tokencache "k8s.io/apiserver/pkg/authentication/token/cache"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/kubernetes"
)

// Authorization modes of upstream's KubeletConfiguration.
const (
	AuthorizationModeWebhook     = "Webhook"
	AuthorizationModeAlwaysAllow = "AlwaysAllow"
)

// AccessConfig is upstream kubelet's authentication and authorization
// configuration (KubeletAuthentication, KubeletAuthorization), with the
// defaults of its configuration file (v1beta1): webhook authentication
// with a 2 min cache, Webhook authorization caching allowed decisions
// 5 min and refusals 30 s, no anonymous access.
type AccessConfig struct {
	// Anonymous lets requests without credentials through as
	// system:anonymous (authentication.anonymous.enabled,
	// --anonymous-auth); the authorizer still decides.
	Anonymous bool
	// Webhook authenticates bearer tokens with a TokenReview
	// (authentication.webhook.enabled, --authentication-token-webhook),
	// caching answers WebhookCacheTTL
	// (--authentication-token-webhook-cache-ttl).
	Webhook         bool
	WebhookCacheTTL time.Duration
	// AuthorizationMode is Webhook (a SubjectAccessReview per request,
	// cached AuthorizedTTL if allowed, UnauthorizedTTL if not) or
	// AlwaysAllow (--authorization-mode).
	AuthorizationMode              string
	AuthorizedTTL, UnauthorizedTTL time.Duration
}

// DefaultAccessConfig is the configuration file's defaults.
func DefaultAccessConfig() AccessConfig {
	return AccessConfig{Webhook: true, WebhookCacheTTL: 2 * time.Minute, AuthorizationMode: AuthorizationModeWebhook,
		AuthorizedTTL: 5 * time.Minute, UnauthorizedTTL: 30 * time.Second}
}

// Delegated builds what upstream's kubelet builds (cmd/kubelet/app/auth.go
// on k8s.io/apiserver's DelegatingAuthenticatorConfig and
// DelegatingAuthorizerConfig), from the same pieces of k8s.io/apiserver
// but for the two webhook clients: those factories' TokenReview and
// SubjectAccessReview plugins would add 8.9 MB to the nodelet's 62.8 MB
// (CEL, the generic webhook's tracing and egress selector; these pieces
// add 0.7 MB) for two API calls, which
// tokenReviewer and sarAuthorizer make with the same requests, retries and
// caches.
//
// Authentication: client certificates of clientCAs (common name and
// organizations), then with Webhook bearer tokens (header or WebSocket
// protocol) the API server reviews, cached WebhookCacheTTL, every
// authenticated caller in system:authenticated; with Anonymous, a request
// none of them identifies is system:anonymous. Authorization: Webhook
// asks the API server, AlwaysAllow allows.
func Delegated(ac AccessConfig, client kubernetes.Interface, clientCAs *x509.CertPool) (authenticator.Request, authorizer.UnconditionalAuthorizer, error) {
	var authns []authenticator.Request
	if clientCAs != nil {
		opts := x509.VerifyOptions{Roots: clientCAs, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		authns = append(authns, x509request.New(opts, x509request.CommonNameUserConversion))
	}
	if ac.Webhook {
		if client == nil {
			return nil, nil, errors.New("nodeapi: no client provided, cannot use webhook authentication")
		}
		tokens := tokencache.New(&tokenReviewer{client: client, backoff: webhookRetryBackoff()}, false, ac.WebhookCacheTTL, ac.WebhookCacheTTL)
		authns = append(authns, bearertoken.New(tokens), websocket.NewProtocolAuthenticator(tokens))
	}
	var authn authenticator.Request
	switch {
	case len(authns) > 0:
		authn = group.NewAuthenticatedGroupAdder(union.New(authns...))
		if ac.Anonymous {
			authn = union.NewFailOnError(authn, anonymous.NewAuthenticator(nil))
		}
	case ac.Anonymous:
		authn = anonymous.NewAuthenticator(nil)
	default:
		return nil, nil, errors.New("nodeapi: no authentication method configured")
	}

	switch ac.AuthorizationMode {
	case AuthorizationModeAlwaysAllow:
		return authn, alwaysAllow(), nil
	case AuthorizationModeWebhook:
		if client == nil {
			return nil, nil, errors.New("nodeapi: no client provided, cannot use webhook authorization")
		}
		return authn, &sarAuthorizer{client: client, backoff: webhookRetryBackoff(), decisions: cache.NewLRUExpireCache(8192),
			allowedTTL: ac.AuthorizedTTL, deniedTTL: ac.UnauthorizedTTL}, nil
	case "":
		return nil, nil, errors.New("nodeapi: no authorization mode specified")
	}
	return nil, nil, fmt.Errorf("nodeapi: unknown authorization mode %s", ac.AuthorizationMode)
}

func alwaysAllow() authorizer.UnconditionalAuthorizer {
	return authorizer.AuthorizerFunc(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
		return authorizer.DecisionAllow, "", nil
	})
}

// webhookRetryBackoff is k8s.io/apiserver's DefaultAuthWebhookRetryBackoff,
// which upstream's kubelet gives both webhooks.
func webhookRetryBackoff() wait.Backoff {
	return wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
}

// withBackoff is k8s.io/apiserver's webhook.WithExponentialBackoff with
// DefaultShouldRetry: call is retried while it fails transiently (a
// connection reset or lost, an internal error, a timeout, 429, or a
// Retry-After), and its last error returned.
func withBackoff(ctx context.Context, b wait.Backoff, call func() error) error {
	var callErr error
	err := wait.ExponentialBackoffWithContext(ctx, b, func(context.Context) (bool, error) {
		callErr = call()
		if shouldRetry(callErr) {
			return false, nil
		}
		return callErr == nil, callErr
	})
	switch {
	case callErr != nil:
		return callErr
	case err != nil:
		return fmt.Errorf("webhook call failed: %w", err)
	}
	return nil
}

func shouldRetry(err error) bool {
	if err == nil {
		return false
	}
	if utilnet.IsConnectionReset(err) || utilnet.IsHTTP2ConnectionLost(err) || apierrors.IsInternalError(err) ||
		apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) {
		return true
	}
	_, retry := apierrors.SuggestsClientDelay(err)
	return retry
}

// tokenReviewer is the TokenReview call of upstream's webhook token
// authenticator (plugin/pkg/authenticator/token/webhook) through the
// node's client: the token (and the request's audiences, if any) in, the
// user out; not authenticated is no error unless the review says why.
type tokenReviewer struct {
	client  kubernetes.Interface
	backoff wait.Backoff
}

func (t *tokenReviewer) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	wantAuds, checkAuds := authenticator.AudiencesFrom(ctx)
	review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: wantAuds}}
	var result *authenticationv1.TokenReview
	if err := withBackoff(ctx, t.backoff, func() (err error) {
		result, err = t.client.AuthenticationV1().TokenReviews().Create(ctx, review, metav1.CreateOptions{})
		return err
	}); err != nil {
		return nil, false, fmt.Errorf("token review: %w", err)
	}
	var auds authenticator.Audiences
	if checkAuds {
		if auds = wantAuds.Intersect(result.Status.Audiences); len(auds) == 0 {
			return nil, false, nil
		}
	}
	st := result.Status
	if !st.Authenticated {
		if st.Error != "" {
			return nil, false, errors.New(st.Error)
		}
		return nil, false, nil
	}
	var extra map[string][]string
	if st.User.Extra != nil {
		extra = make(map[string][]string, len(st.User.Extra))
		for k, v := range st.User.Extra {
			extra[k] = v
		}
	}
	return &authenticator.Response{Audiences: auds,
		User: &user.DefaultInfo{Name: st.User.Username, UID: st.User.UID, Groups: st.User.Groups, Extra: extra}}, true, nil
}

// sarAuthorizer is upstream's webhook authorizer (plugin/pkg/authorizer/
// webhook, as DelegatingAuthorizerConfig builds it: no opinion on
// failure) through the node's client: the attributes as a
// SubjectAccessReview, whose whole spec is the cache key; allowed answers
// kept allowedTTL, others deniedTTL.
type sarAuthorizer struct {
	client                kubernetes.Interface
	backoff               wait.Backoff
	decisions             *cache.LRUExpireCache
	allowedTTL, deniedTTL time.Duration
}

func (s *sarAuthorizer) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	review := &authorizationv1.SubjectAccessReview{}
	if u := a.GetUser(); u != nil {
		review.Spec = authorizationv1.SubjectAccessReviewSpec{User: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups()}
		for k, v := range u.GetExtra() {
			if review.Spec.Extra == nil {
				review.Spec.Extra = map[string]authorizationv1.ExtraValue{}
			}
			review.Spec.Extra[k] = v
		}
	}
	if a.IsResourceRequest() {
		review.Spec.ResourceAttributes = &authorizationv1.ResourceAttributes{Namespace: a.GetNamespace(), Verb: a.GetVerb(),
			Group: a.GetAPIGroup(), Version: a.GetAPIVersion(), Resource: a.GetResource(), Subresource: a.GetSubresource(), Name: a.GetName()}
	} else {
		review.Spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: a.GetPath(), Verb: a.GetVerb()}
	}
	key, err := json.Marshal(review.Spec)
	if err != nil {
		return authorizer.DecisionNoOpinion, "", err
	}
	var st authorizationv1.SubjectAccessReviewStatus
	if v, ok := s.decisions.Get(string(key)); ok {
		st = v.(authorizationv1.SubjectAccessReviewStatus)
	} else {
		var result *authorizationv1.SubjectAccessReview
		if err := withBackoff(ctx, s.backoff, func() (err error) {
			result, err = s.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
			return err
		}); err != nil {
			return authorizer.DecisionNoOpinion, "", fmt.Errorf("subject access review: %w", err)
		}
		st = result.Status
		ttl := s.deniedTTL
		if st.Allowed {
			ttl = s.allowedTTL
		}
		s.decisions.Add(string(key), st, ttl)
	}
	switch {
	case st.Denied && st.Allowed:
		return authorizer.DecisionDeny, st.Reason, errors.New("webhook subject access review returned both allow and deny response")
	case st.Denied:
		return authorizer.DecisionDeny, st.Reason, nil
	case st.Allowed:
		return authorizer.DecisionAllow, st.Reason, nil
	}
	return authorizer.DecisionNoOpinion, st.Reason, nil
}
