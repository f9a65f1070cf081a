package registry

import (
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// selfSubjectReviewResource serves authentication.k8s.io/v1
// SelfSubjectReviews (kubectl auth whoami): the caller's own user, as the
// API server authenticated it.
func selfSubjectReviewResource() *Resource {
	return &Resource{
		GroupVersion: authenticationv1.SchemeGroupVersion,
		Name:         "selfsubjectreviews",
		Kind:         "SelfSubjectReview",
		Verbs:        []string{"create"},
		Review:       true,
		New:          func() runtime.Object { return &authenticationv1.SelfSubjectReview{} },
	}
}

// tokenReviewResource serves authentication.k8s.io/v1 TokenReviews: is
// this bearer token valid, and whose is it (webhook token authentication,
// the nodes' API)?
func tokenReviewResource() *Resource {
	return &Resource{
		GroupVersion: authenticationv1.SchemeGroupVersion,
		Name:         "tokenreviews",
		Kind:         "TokenReview",
		Verbs:        []string{"create"},
		Review:       true,
		New:          func() runtime.Object { return &authenticationv1.TokenReview{} },
	}
}
