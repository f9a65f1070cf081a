package registry

import (
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// accessReviewResources serve authorization.k8s.io/v1's access reviews
// (kubectl auth can-i): may this user (SubjectAccessReview, and
// LocalSubjectAccessReview within a namespace) or may I
// (SelfSubjectAccessReview) do this? The API server answers with its
// authorizer.
func accessReviewResources() []*Resource {
	review := func(name, kind string, namespaced bool, newObj func() runtime.Object) *Resource {
		return &Resource{GroupVersion: authorizationv1.SchemeGroupVersion, Name: name, Kind: kind,
			Namespaced: namespaced, Verbs: []string{"create"}, Review: true, New: newObj}
	}
	return []*Resource{
		review("localsubjectaccessreviews", "LocalSubjectAccessReview", true,
			func() runtime.Object { return &authorizationv1.LocalSubjectAccessReview{} }),
		review("selfsubjectaccessreviews", "SelfSubjectAccessReview", false,
			func() runtime.Object { return &authorizationv1.SelfSubjectAccessReview{} }),
		review("selfsubjectrulesreviews", "SelfSubjectRulesReview", false,
			func() runtime.Object { return &authorizationv1.SelfSubjectRulesReview{} }),
		review("subjectaccessreviews", "SubjectAccessReview", false,
			func() runtime.Object { return &authorizationv1.SubjectAccessReview{} }),
	}
}
