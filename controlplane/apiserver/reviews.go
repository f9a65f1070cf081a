package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
)

// serveReview answers a create of a review resource (registry.Resource
// Review): nothing is stored; the response is the request with its status
// filled in, 201 as upstream.
func (s *Server) serveReview(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	res := info.Resource
	if info.Verb != "create" || info.Subresource != "" || info.Name != "" {
		return apierrors.NewMethodNotSupported(groupResource(res), info.Verb)
	}
	obj, err := s.decodeObject(w, r, res)
	if err != nil {
		return err
	}
	var out runtime.Object
	switch review := obj.(type) {
	case *authenticationv1.SelfSubjectReview:
		out, err = selfSubjectReview(r, review)
	case *authenticationv1.TokenReview:
		out, err = s.tokenReview(r, review)
	case *authorizationv1.SelfSubjectAccessReview:
		out, err = s.selfSubjectAccessReview(r, review)
	case *authorizationv1.SelfSubjectRulesReview:
		out, err = s.selfSubjectRulesReview(r, review)
	case *authorizationv1.SubjectAccessReview:
		out, err = s.subjectAccessReview(r.Context(), review.Spec, &review.Status, review)
	case *authorizationv1.LocalSubjectAccessReview:
		if review.Namespace == "" {
			review.Namespace = info.Namespace
		}
		if ra := review.Spec.ResourceAttributes; ra == nil || ra.Namespace != info.Namespace || review.Namespace != info.Namespace {
			return apierrors.NewBadRequest(fmt.Sprintf("spec.resourceAttributes.namespace must match the namespace of the request (%s)", info.Namespace))
		}
		out, err = s.subjectAccessReview(r.Context(), review.Spec, &review.Status, review)
	default:
		return apierrors.NewMethodNotSupported(groupResource(res), info.Verb)
	}
	if err != nil {
		return err
	}
	return s.writeObject(w, r, http.StatusCreated, res, out)
}

// selfSubjectReview tells the caller who the API server thinks it is.
func selfSubjectReview(r *http.Request, review *authenticationv1.SelfSubjectReview) (runtime.Object, error) {
	u, ok := genericrequest.UserFrom(r.Context())
	if !ok {
		return nil, apierrors.NewInternalError(errNoUser)
	}
	review.Status = authenticationv1.SelfSubjectReviewStatus{UserInfo: userInfo(u)}
	return review, nil
}

func userInfo(u user.Info) authenticationv1.UserInfo {
	info := authenticationv1.UserInfo{Username: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups()}
	if extra := u.GetExtra(); len(extra) > 0 {
		info.Extra = make(map[string]authenticationv1.ExtraValue, len(extra))
		for k, v := range extra {
			info.Extra[k] = v
		}
	}
	return info
}

// tokenReview authenticates spec.token as if a request carried it (the
// chain without client certificates), for spec.audiences or the API
// server's own, as upstream's tokenreview REST does. A token that is not
// valid is a review with authenticated false and the error, not a
// failed request.
func (s *Server) tokenReview(r *http.Request, review *authenticationv1.TokenReview) (runtime.Object, error) {
	if review.Spec.Token == "" {
		return nil, apierrors.NewBadRequest("token is required for TokenReview in authentication")
	}
	auds := review.Spec.Audiences
	if len(auds) == 0 && s.cfg.Tokens != nil {
		auds = s.cfg.Tokens.Audiences()
	}
	fake := (&http.Request{Header: http.Header{}}).WithContext(r.Context())
	fake.Header.Set("Authorization", "Bearer "+review.Spec.Token)
	if len(auds) > 0 {
		fake = fake.WithContext(authenticator.WithAudiences(fake.Context(), auds))
	}
	resp, ok, err := s.cfg.Authn.AuthenticateRequest(fake)
	review.Status = authenticationv1.TokenReviewStatus{Authenticated: ok && err == nil}
	if err != nil {
		review.Status.Error = err.Error()
	}
	if !review.Status.Authenticated || resp == nil || resp.User == nil || resp.User.GetName() == user.Anonymous {
		review.Status.Authenticated = false
		return review, nil
	}
	if len(auds) > 0 && len(authenticator.Audiences(auds).Intersect(resp.Audiences)) == 0 {
		return nil, apierrors.NewInternalError(errors.New("token audiences do not intersect the requested audiences"))
	}
	review.Status.User = userInfo(resp.User)
	review.Status.Audiences = resp.Audiences
	return review, nil
}

// selfSubjectAccessReview asks the authorizer whether the caller may do
// what the spec describes (kubectl auth can-i).
func (s *Server) selfSubjectAccessReview(r *http.Request, review *authorizationv1.SelfSubjectAccessReview) (runtime.Object, error) {
	u, ok := genericrequest.UserFrom(r.Context())
	if !ok {
		return nil, apierrors.NewInternalError(errNoUser)
	}
	if (review.Spec.ResourceAttributes == nil) == (review.Spec.NonResourceAttributes == nil) {
		return nil, apierrors.NewBadRequest("exactly one of resourceAttributes and nonResourceAttributes must be set")
	}
	attrs := accessAttributes(u, review.Spec.ResourceAttributes, review.Spec.NonResourceAttributes)
	review.Status = s.decide(r.Context(), attrs)
	return review, nil
}

// selfSubjectRulesReview lists what the caller may do in a namespace
// (kubectl auth can-i --list), from the authorizer's rules as upstream's
// registry answers it: only the status, incomplete when some authorizer
// cannot list its rules.
func (s *Server) selfSubjectRulesReview(r *http.Request, review *authorizationv1.SelfSubjectRulesReview) (runtime.Object, error) {
	u, ok := genericrequest.UserFrom(r.Context())
	if !ok {
		return nil, apierrors.NewInternalError(errNoUser)
	}
	if review.Spec.Namespace == "" {
		return nil, apierrors.NewBadRequest("no namespace on request")
	}
	out := &authorizationv1.SelfSubjectRulesReview{}
	resolver, ok := s.cfg.Authz.(authorizer.RuleResolver)
	if !ok {
		out.Status.Incomplete = true
		return out, nil
	}
	rules, nonResource, incomplete, err := resolver.RulesFor(r.Context(), u, review.Spec.Namespace)
	for _, ri := range rules {
		out.Status.ResourceRules = append(out.Status.ResourceRules, authorizationv1.ResourceRule{Verbs: ri.GetVerbs(),
			APIGroups: ri.GetAPIGroups(), Resources: ri.GetResources(), ResourceNames: ri.GetResourceNames()})
	}
	for _, ri := range nonResource {
		out.Status.NonResourceRules = append(out.Status.NonResourceRules, authorizationv1.NonResourceRule{Verbs: ri.GetVerbs(),
			NonResourceURLs: ri.GetNonResourceURLs()})
	}
	out.Status.Incomplete = incomplete
	if err != nil {
		out.Status.EvaluationError = err.Error()
	}
	return out, nil
}

// subjectAccessReview asks the authorizer about the user the spec names,
// writing the answer into status.
func (s *Server) subjectAccessReview(ctx context.Context, spec authorizationv1.SubjectAccessReviewSpec,
	status *authorizationv1.SubjectAccessReviewStatus, review runtime.Object) (runtime.Object, error) {
	if (spec.ResourceAttributes == nil) == (spec.NonResourceAttributes == nil) {
		return nil, apierrors.NewBadRequest("exactly one of resourceAttributes and nonResourceAttributes must be set")
	}
	if spec.User == "" && len(spec.Groups) == 0 {
		return nil, apierrors.NewBadRequest("at least one of user or group must be specified")
	}
	u := &user.DefaultInfo{Name: spec.User, UID: spec.UID, Groups: spec.Groups}
	if len(spec.Extra) > 0 {
		u.Extra = make(map[string][]string, len(spec.Extra))
		for k, v := range spec.Extra {
			u.Extra[k] = v
		}
	}
	*status = s.decide(ctx, accessAttributes(u, spec.ResourceAttributes, spec.NonResourceAttributes))
	return review, nil
}

func accessAttributes(u user.Info, ra *authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes) *authorizer.AttributesRecord {
	if nra != nil {
		return &authorizer.AttributesRecord{User: u, Verb: nra.Verb, Path: nra.Path}
	}
	return &authorizer.AttributesRecord{User: u, Verb: ra.Verb, Namespace: ra.Namespace, APIGroup: ra.Group,
		APIVersion: ra.Version, Resource: ra.Resource, Subresource: ra.Subresource, Name: ra.Name, ResourceRequest: true}
}

// decide is the authorizer's answer as an access review's status.
func (s *Server) decide(ctx context.Context, attrs authorizer.Attributes) authorizationv1.SubjectAccessReviewStatus {
	decision, reason, err := s.cfg.Authz.Authorize(ctx, attrs)
	st := authorizationv1.SubjectAccessReviewStatus{Allowed: decision == authorizer.DecisionAllow,
		Denied: decision == authorizer.DecisionDeny, Reason: reason}
	if err != nil {
		st.EvaluationError = err.Error()
	}
	return st
}
