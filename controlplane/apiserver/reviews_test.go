package apiserver

import (
	"context"
	"net/http"
	"slices"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
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
