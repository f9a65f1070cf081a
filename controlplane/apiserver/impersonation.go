package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// Impersonation as upstream's filter (k8s.io/apiserver/pkg/endpoints/
// filters/impersonation) does it: the Impersonate-User, -Group, -Uid and
// -Extra-* headers name who the request acts as; the caller must be
// allowed the verb impersonate on each (users, serviceaccounts, groups,
// uids, userextras/KEY). Upstream's package itself is not linked: through
// its audit and logging imports it would add 46 MB to the control plane.

// actAs is one thing a request asks to act as, with the attributes the
// caller must be authorized for.
type actAs struct {
	attrs authorizer.AttributesRecord
	kind  string // User, ServiceAccount, Group, UserExtra, UID
	value string
	key   string // UserExtra
	ns    string // ServiceAccount
}

// impersonationRequests reads the headers (none: nil). Groups, extras or a
// uid without a user are refused with 400, as upstream.
func impersonationRequests(h http.Header) ([]actAs, error) {
	var out []actAs
	add := func(a actAs, group, version, resource, sub string) {
		a.attrs = authorizer.AttributesRecord{Verb: "impersonate", APIGroup: group, APIVersion: version,
			Resource: resource, Subresource: sub, Namespace: a.ns, Name: a.value, ResourceRequest: true}
		out = append(out, a)
	}
	name := h.Get(authenticationv1.ImpersonateUserHeader)
	if name != "" {
		if ns, sa, err := serviceaccount.SplitUsername(name); err == nil {
			add(actAs{kind: "ServiceAccount", ns: ns, value: sa}, "", "v1", "serviceaccounts", "")
		} else {
			add(actAs{kind: "User", value: name}, "", "v1", "users", "")
		}
	}
	for _, g := range h[authenticationv1.ImpersonateGroupHeader] {
		add(actAs{kind: "Group", value: g}, "", "v1", "groups", "")
	}
	for header, values := range h {
		if !strings.HasPrefix(header, authenticationv1.ImpersonateUserExtraHeaderPrefix) {
			continue
		}
		key := strings.ToLower(header[len(authenticationv1.ImpersonateUserExtraHeaderPrefix):])
		if unescaped, err := url.PathUnescape(key); err == nil {
			key = unescaped
		}
		for _, v := range values {
			add(actAs{kind: "UserExtra", key: key, value: v}, authenticationv1.GroupName, "v1", "userextras", key)
		}
	}
	if uid := h.Get(authenticationv1.ImpersonateUIDHeader); uid != "" {
		add(actAs{kind: "UID", value: uid}, authenticationv1.GroupName, "v1", "uids", "")
	}
	if len(out) > 0 && name == "" {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("requested %d impersonation(s) without impersonating a user", len(out)))
	}
	return out, nil
}

// impersonatedUser authorizes caller for every request and returns the
// user the request acts as, with upstream's group rules: a service
// account's groups when none are named, then system:authenticated (or
// system:unauthenticated for system:anonymous) unless named.
func impersonatedUser(ctx context.Context, authz authorizer.Authorizer, caller user.Info, reqs []actAs) (user.Info, error) {
	u := &user.DefaultInfo{}
	groupsNamed := false
	for _, r := range reqs {
		if r.kind == "Group" {
			groupsNamed = true
		}
	}
	for _, r := range reqs {
		attrs := r.attrs
		attrs.User = caller
		decision, reason, err := authz.Authorize(ctx, &attrs)
		if err != nil || decision != authorizer.DecisionAllow {
			msg := forbiddenMessage(&attrs)
			if reason != "" {
				msg += ": " + reason
			}
			return nil, apierrors.NewForbidden(schema.GroupResource{Group: attrs.APIGroup, Resource: attrs.Resource}, attrs.Name, errors.New(msg))
		}
		switch r.kind {
		case "ServiceAccount":
			u.Name = serviceaccount.MakeUsername(r.ns, r.value)
			if !groupsNamed {
				u.Groups = serviceaccount.MakeGroupNames(r.ns)
			}
		case "User":
			u.Name = r.value
		case "Group":
			u.Groups = append(u.Groups, r.value)
		case "UserExtra":
			if u.Extra == nil {
				u.Extra = map[string][]string{}
			}
			u.Extra[r.key] = append(u.Extra[r.key], r.value)
		case "UID":
			u.UID = r.value
		}
	}
	u.Groups = withAuthenticatedGroup(u.Name, u.Groups)
	return u, nil
}

func withAuthenticatedGroup(name string, groups []string) []string {
	want, skip := user.AllAuthenticated, user.AllUnauthenticated
	if name == user.Anonymous {
		want, skip = user.AllUnauthenticated, ""
	}
	for _, g := range groups {
		if g == want || (skip != "" && g == skip) {
			return groups
		}
	}
	return append(groups, want)
}

// dropImpersonationHeaders removes the headers once they are applied, as
// upstream does, so nothing downstream acts on them again.
func dropImpersonationHeaders(h http.Header) {
	h.Del(authenticationv1.ImpersonateUserHeader)
	h.Del(authenticationv1.ImpersonateGroupHeader)
	h.Del(authenticationv1.ImpersonateUIDHeader)
	for name := range h {
		if strings.HasPrefix(name, authenticationv1.ImpersonateUserExtraHeaderPrefix) {
			h.Del(name)
		}
	}
}
