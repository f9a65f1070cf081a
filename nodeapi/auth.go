package nodeapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/kubernetes"
)

// Caller is an authenticated user of the node's API.
type Caller struct {
	Name, UID string
	Groups    []string
	Extra     map[string][]string
}

// Access is what a request asks of the node, as upstream's kubelet
// describes it to the authorizer: verb on nodes/<subresource> of this
// node.
type Access struct {
	Verb, Subresource string
}

// Reviewer is the API server deciding for the node, as upstream's kubelet
// with --authentication-token-webhook and --authorization-mode=Webhook:
// who a bearer token is (TokenReview) and whether a caller may do
// something (SubjectAccessReview).
type Reviewer interface {
	// Authenticate returns the token's user, nil if it is not valid.
	Authenticate(ctx context.Context, token string) (*Caller, error)
	// Authorize reports whether c may have access, and why not.
	Authorize(ctx context.Context, c *Caller, a Access) (bool, string, error)
}

// requestAccess is upstream kubelet's mapping of a request to what it
// asks (pkg/kubelet/server/auth.go): the verb from the method, the
// subresource from the path; with fine-grained authorization (on by
// default) /pods is nodes/pods, with nodes/proxy as the fallback.
func requestAccess(r *http.Request) []Access {
	verb := "get"
	switch r.Method {
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
	}
	p := path.Clean(r.URL.Path)
	sub := func(prefix string) bool { return p == prefix || strings.HasPrefix(p, prefix+"/") }
	switch {
	case sub("/stats"):
		return []Access{{verb, "stats"}}
	case sub("/metrics"):
		return []Access{{verb, "metrics"}}
	case sub("/logs"):
		return []Access{{verb, "log"}}
	case sub("/pods"):
		return []Access{{verb, "pods"}, {verb, "proxy"}}
	}
	return []Access{{verb, "proxy"}}
}

// DelegatedReviewer asks the API server through the node's client,
// caching answers as upstream's kubelet does by default: tokens 2 min,
// allowed decisions 5 min, denied ones 30 s.
type DelegatedReviewer struct {
	client  kubernetes.Interface
	node    string
	tokens  *cache.LRUExpireCache
	allowed *cache.LRUExpireCache
}

// NewDelegatedReviewer reviews for the node named node.
func NewDelegatedReviewer(client kubernetes.Interface, node string) *DelegatedReviewer {
	return &DelegatedReviewer{client: client, node: node, tokens: cache.NewLRUExpireCache(1024), allowed: cache.NewLRUExpireCache(1024)}
}

type decision struct {
	allowed bool
	reason  string
}

// Authenticate implements Reviewer with a TokenReview.
func (d *DelegatedReviewer) Authenticate(ctx context.Context, token string) (*Caller, error) {
	if c, ok := d.tokens.Get(token); ok {
		return c.(*Caller), nil
	}
	tr, err := d.client.AuthenticationV1().TokenReviews().Create(ctx,
		&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token review: %w", err)
	}
	var c *Caller
	if tr.Status.Authenticated {
		u := tr.Status.User
		c = &Caller{Name: u.Username, UID: u.UID, Groups: u.Groups}
		if len(u.Extra) > 0 {
			c.Extra = make(map[string][]string, len(u.Extra))
			for k, v := range u.Extra {
				c.Extra[k] = v
			}
		}
	}
	d.tokens.Add(token, c, 2*time.Minute)
	return c, nil
}

// Authorize implements Reviewer with a SubjectAccessReview on this node.
func (d *DelegatedReviewer) Authorize(ctx context.Context, c *Caller, a Access) (bool, string, error) {
	spec := authorizationv1.SubjectAccessReviewSpec{User: c.Name, UID: c.UID, Groups: c.Groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: a.Verb, Version: "v1", Resource: "nodes",
			Subresource: a.Subresource, Name: d.node}}
	for k, v := range c.Extra {
		if spec.Extra == nil {
			spec.Extra = map[string]authorizationv1.ExtraValue{}
		}
		spec.Extra[k] = v
	}
	// The whole question, encoded without ambiguity, is the cache key,
	// as upstream's webhook authorizer keys its cache.
	keyBytes, err := json.Marshal(spec)
	if err != nil {
		return false, "", fmt.Errorf("subject access review: %w", err)
	}
	key := string(keyBytes)
	if v, ok := d.allowed.Get(key); ok {
		dec := v.(decision)
		return dec.allowed, dec.reason, nil
	}
	sar, err := d.client.AuthorizationV1().SubjectAccessReviews().Create(ctx,
		&authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return false, "", fmt.Errorf("subject access review: %w", err)
	}
	dec := decision{allowed: sar.Status.Allowed, reason: sar.Status.Reason}
	ttl := 30 * time.Second
	if dec.allowed {
		ttl = 5 * time.Minute
	}
	d.allowed.Add(key, dec, ttl)
	return dec.allowed, dec.reason, nil
}

// caller authenticates a request: a client certificate of the cluster CA
// (its common name the user, its organizations the groups), else a
// bearer token the Reviewer accepts. nil: not authenticated.
func (s *Server) caller(r *http.Request) (*Caller, error) {
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		subject := r.TLS.VerifiedChains[0][0].Subject
		// A copy: the certificate may be shared by resumed connections.
		return &Caller{Name: subject.CommonName, Groups: append(slices.Clone(subject.Organization), "system:authenticated")}, nil
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || strings.TrimSpace(token) == "" || s.cfg.Reviewer == nil {
		return nil, nil
	}
	return s.cfg.Reviewer.Authenticate(r.Context(), strings.TrimSpace(token))
}

// authorize lets through authenticated callers the API server (or, with
// no Reviewer, the static AllowedUsers and AllowedGroups) allows.
func (s *Server) authorize(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := s.caller(r)
		if err != nil {
			s.log.Warn("authentication failed", "err", err)
			writeStatus(w, apierrors.NewInternalError(err))
			return
		}
		if c == nil {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		access := requestAccess(r)
		if s.cfg.Reviewer == nil {
			if slices.Contains(s.cfg.AllowedUsers, c.Name) || slices.ContainsFunc(c.Groups, func(g string) bool { return slices.Contains(s.cfg.AllowedGroups, g) }) {
				h.ServeHTTP(w, r)
				return
			}
		} else {
			for _, a := range access {
				ok, _, err := s.cfg.Reviewer.Authorize(r.Context(), c, a)
				if err != nil {
					s.log.Warn("authorization failed", "user", c.Name, "err", err)
					writeStatus(w, apierrors.NewInternalError(err))
					return
				}
				if ok {
					h.ServeHTTP(w, r)
					return
				}
			}
		}
		// Upstream kubelet's answer, naming the last (broadest) check.
		last := access[len(access)-1]
		http.Error(w, fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource=%s)", c.Name, last.Verb, last.Subresource),
			http.StatusForbidden)
	})
}
