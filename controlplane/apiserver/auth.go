package apiserver

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
)

// User is an authenticated caller.
type User struct {
	Name   string
	UID    string
	Groups []string
}

type userKey struct{}

func withUser(ctx context.Context, u *User) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// UserFrom returns the authenticated user of a request context.
func UserFrom(ctx context.Context) *User {
	u, _ := ctx.Value(userKey{}).(*User)
	return u
}

// Authenticator tells who made a request. It returns (nil, nil) when the
// request carries no credentials it recognises, and an error when it
// carries bad ones.
type Authenticator interface {
	Authenticate(r *http.Request) (*User, error)
}

// Authenticators tries each authenticator in turn; the first that
// recognises the request wins.
type Authenticators []Authenticator

func (as Authenticators) Authenticate(r *http.Request) (*User, error) {
	for _, a := range as {
		u, err := a.Authenticate(r)
		if err != nil || u != nil {
			return u, err
		}
	}
	return nil, nil
}

// CertAuthenticator maps a verified TLS client certificate to a user: the
// common name is the user, the organizations are the groups. The TLS layer
// has already verified the chain against the cluster CA.
type CertAuthenticator struct{}

func (CertAuthenticator) Authenticate(r *http.Request) (*User, error) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return nil, nil
	}
	cert := r.TLS.VerifiedChains[0][0]
	if cert.Subject.CommonName == "" {
		return nil, errors.New("client certificate has no common name")
	}
	groups := append([]string{}, cert.Subject.Organization...)
	return &User{Name: cert.Subject.CommonName, Groups: append(groups, "system:authenticated")}, nil
}

// TokenAuthenticator checks bearer tokens against a static table, in the
// format of upstream's --token-auth-file: token,user,uid,"group1,group2".
type TokenAuthenticator struct {
	tokens map[string]*User
}

// LoadTokenFile reads a token file.
func LoadTokenFile(path string) (*TokenAuthenticator, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open token file: %w", err)
	}
	defer f.Close()
	rd := csv.NewReader(f)
	rd.FieldsPerRecord = -1
	rd.Comment = '#'
	records, err := rd.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("read token file %s: %w", path, err)
	}
	ta := &TokenAuthenticator{tokens: map[string]*User{}}
	for i, rec := range records {
		if len(rec) < 2 || rec[0] == "" || rec[1] == "" {
			return nil, fmt.Errorf("token file %s line %d: want token,user[,uid[,groups]]", path, i+1)
		}
		u := &User{Name: rec[1]}
		if len(rec) > 2 {
			u.UID = rec[2]
		}
		if len(rec) > 3 && rec[3] != "" {
			u.Groups = strings.Split(rec[3], ",")
		}
		u.Groups = append(u.Groups, "system:authenticated")
		ta.tokens[rec[0]] = u
	}
	return ta, nil
}

// NewTokenAuthenticator builds a token table from a map of token to user.
func NewTokenAuthenticator(tokens map[string]User) *TokenAuthenticator {
	ta := &TokenAuthenticator{tokens: map[string]*User{}}
	for tok, u := range tokens {
		u := u
		u.Groups = append(append([]string{}, u.Groups...), "system:authenticated")
		ta.tokens[tok] = &u
	}
	return ta
}

func (ta *TokenAuthenticator) Authenticate(r *http.Request) (*User, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return nil, nil
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return nil, nil
	}
	tok = strings.TrimSpace(tok)
	if u, ok := ta.tokens[tok]; ok && tok != "" {
		return u, nil
	}
	return nil, errors.New("invalid bearer token")
}

// Attributes describe a request for authorization, as upstream's
// authorizer.Attributes do.
type Attributes struct {
	User            *User
	Verb            string
	ResourceRequest bool
	APIGroup        string
	APIVersion      string
	Resource        string
	Subresource     string
	Namespace       string
	Name            string
	Path            string
}

// Authorizer decides whether a request may proceed. RBAC and the Node
// authorizer plug in here later.
type Authorizer interface {
	Authorize(ctx context.Context, a Attributes) (allowed bool, reason string, err error)
}

// AllowAuthenticated allows every authenticated user everything.
type AllowAuthenticated struct{}

func (AllowAuthenticated) Authorize(ctx context.Context, a Attributes) (bool, string, error) {
	if a.User == nil {
		return false, "anonymous requests are not allowed", nil
	}
	return true, "", nil
}
