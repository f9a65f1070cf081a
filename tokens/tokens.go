// Package tokens keeps the ServiceAccount tokens of the node's projected
// volumes, as upstream's kubelet token manager (pkg/kubelet/token) does: a
// token is requested from the API server (TokenRequest, bound to its pod)
// once and served from memory until it is within 20 % of its lifetime of
// expiring, or 24 hours old, when the next request fetches a new one. The
// volumes manager asks at every pod sync, so tokens are rewritten in time.
package tokens

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// maxTTL is how long a token is used at most, whatever its lifetime
// (upstream's).
const maxTTL = 24 * time.Hour

// Requester asks the API server for a token (client-go's CreateToken).
type Requester func(ctx context.Context, namespace, serviceAccount string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)

// FromClient is the Requester of a clientset.
func FromClient(cs kubernetes.Interface) Requester {
	return func(ctx context.Context, ns, sa string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
		return cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, tr, metav1.CreateOptions{})
	}
}

// Manager caches tokens. Safe for concurrent use.
type Manager struct {
	request Requester
	now     func() time.Time
	mu      sync.Mutex
	cache   map[string]*authenticationv1.TokenRequest
}

// New returns a Manager requesting through request; now is the clock (nil:
// time.Now).
func New(request Requester, now func() time.Time) *Manager {
	if now == nil {
		now = time.Now
	}
	return &Manager{request: request, now: now, cache: map[string]*authenticationv1.TokenRequest{}}
}

// ServiceAccountToken returns a token of namespace/serviceAccount for
// spec: the cached one while it is fresh, else a new one. A failed request
// falls back to a cached token that has not expired yet, as upstream.
func (m *Manager) ServiceAccountToken(ctx context.Context, namespace, serviceAccount string, spec authenticationv1.TokenRequestSpec) (*authenticationv1.TokenRequest, error) {
	key := cacheKey(namespace, serviceAccount, spec)
	m.mu.Lock()
	cached := m.cache[key]
	m.mu.Unlock()
	now := m.now()
	if cached != nil && !needsRefresh(cached, now) {
		return cached, nil
	}
	tr, err := m.request(ctx, namespace, serviceAccount, &authenticationv1.TokenRequest{Spec: spec})
	if err != nil {
		if cached != nil && now.Before(cached.Status.ExpirationTimestamp.Time) {
			return cached, nil
		}
		return nil, fmt.Errorf("request a token of %s/%s: %w", namespace, serviceAccount, err)
	}
	if tr.Spec.ExpirationSeconds == nil {
		tr.Spec.ExpirationSeconds = spec.ExpirationSeconds
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cache[key] = tr
	for k, t := range m.cache { // what expired is never served again
		if !now.Before(t.Status.ExpirationTimestamp.Time) {
			delete(m.cache, k)
		}
	}
	return tr, nil
}

// needsRefresh: within 20 % of its lifetime of expiring, or older than
// maxTTL (upstream's rule, without its jitter: one node's few tokens do not
// stampede the API server).
func needsRefresh(tr *authenticationv1.TokenRequest, now time.Time) bool {
	if tr.Spec.ExpirationSeconds == nil {
		return true
	}
	ttl := time.Duration(*tr.Spec.ExpirationSeconds) * time.Second
	exp := tr.Status.ExpirationTimestamp.Time
	issued := exp.Add(-ttl)
	return now.After(issued.Add(maxTTL)) || now.After(exp.Add(-ttl/5))
}

func cacheKey(ns, sa string, spec authenticationv1.TokenRequestSpec) string {
	var exp int64
	if spec.ExpirationSeconds != nil {
		exp = *spec.ExpirationSeconds
	}
	var ref authenticationv1.BoundObjectReference
	if spec.BoundObjectRef != nil {
		ref = *spec.BoundObjectRef
	}
	return fmt.Sprintf("%q/%q/%s/%d/%s/%s/%s", ns, sa, strings.Join(spec.Audiences, ","), exp, ref.Kind, ref.Name, ref.UID)
}
