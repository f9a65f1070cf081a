package apiserver

import (
	"net/http"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
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
	info := authenticationv1.UserInfo{Username: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups()}
	if extra := u.GetExtra(); len(extra) > 0 {
		info.Extra = make(map[string]authenticationv1.ExtraValue, len(extra))
		for k, v := range extra {
			info.Extra[k] = v
		}
	}
	review.Status = authenticationv1.SelfSubjectReviewStatus{UserInfo: info}
	return review, nil
}
