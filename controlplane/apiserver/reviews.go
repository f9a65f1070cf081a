package apiserver

import (
	"errors"
	"net/http"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
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
