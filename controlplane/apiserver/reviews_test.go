package apiserver

import (
	"context"
	"net/http"
	"slices"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/controlplane/storage"
)

// kubectl auth whoami: a SelfSubjectReview answers with the caller as the
// API server authenticated it, and stores nothing (no get or list).
func TestSelfSubjectReview(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	cs := env.clientset(t)
	got, err := cs.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create SelfSubjectReview: %v", err)
	}
	u := got.Status.UserInfo
	if u.Username != "admin" || !slices.Contains(u.Groups, "system:masters") || !slices.Contains(u.Groups, "system:authenticated") {
		t.Errorf("user info = %+v", u)
	}
	for _, method := range []string{"GET", "DELETE"} {
		if code, _, body := rawDo(t, env, method, "/apis/authentication.k8s.io/v1/selfsubjectreviews", "", "", nil); code != http.StatusMethodNotAllowed {
			t.Errorf("%s selfsubjectreviews: %d %s", method, code, body)
		}
	}
	res, err := cs.Discovery().ServerResourcesForGroupVersion("authentication.k8s.io/v1")
	if err != nil || len(res.APIResources) != 2 || res.APIResources[0].Name != "selfsubjectreviews" ||
		res.APIResources[1].Name != "tokenreviews" || !slices.Equal(res.APIResources[0].Verbs, []string{"create"}) {
		t.Errorf("discovery: %+v, %v", res, err)
	}
}

// kubectl auth can-i: the access reviews answer with the authorizer's
// decision, for the caller or for the user the spec names.
func TestAccessReviews(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	cs := env.clientset(t)
	ctx := context.Background()
	pods := &authorizationv1.ResourceAttributes{Namespace: "default", Verb: "create", Resource: "pods"}
	self, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: pods}}, metav1.CreateOptions{})
	if err != nil || !self.Status.Allowed || self.Status.Denied {
		t.Errorf("self review: %+v, %v", self, err)
	}
	anon, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: "system:anonymous", Groups: []string{"system:unauthenticated"},
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/api", Verb: "get"}}}, metav1.CreateOptions{})
	if err != nil || anon.Status.Allowed || !anon.Status.Denied || anon.Status.Reason == "" {
		t.Errorf("review for system:anonymous: %+v, %v", anon, err)
	}
	local, err := cs.AuthorizationV1().LocalSubjectAccessReviews("default").Create(ctx, &authorizationv1.LocalSubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: "bob", ResourceAttributes: pods}}, metav1.CreateOptions{})
	if err != nil || !local.Status.Allowed {
		t.Errorf("local review: %+v, %v", local, err)
	}
	elsewhere := &authorizationv1.ResourceAttributes{Namespace: "kube-system", Verb: "get", Resource: "secrets"}
	if _, err := cs.AuthorizationV1().LocalSubjectAccessReviews("default").Create(ctx, &authorizationv1.LocalSubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: "bob", ResourceAttributes: elsewhere}}, metav1.CreateOptions{}); !apierrors.IsBadRequest(err) {
		t.Errorf("a local review of another namespace: %v, want 400", err)
	}
	if _, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: pods}}, metav1.CreateOptions{}); !apierrors.IsBadRequest(err) {
		t.Errorf("a review naming no one: %v, want 400", err)
	}
}
