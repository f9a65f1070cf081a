package tokens

import (
	"context"
	"errors"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// fakeAPI issues numbered tokens valid for the requested lifetime from
// its clock, or fails when told to.
type fakeAPI struct {
	now   time.Time
	calls int
	fail  bool
}

func (f *fakeAPI) request(_ context.Context, ns, sa string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	if f.fail {
		return nil, errors.New("api down")
	}
	f.calls++
	out := tr.DeepCopy()
	out.Status = authenticationv1.TokenRequestStatus{Token: string(rune('a' + f.calls)),
		ExpirationTimestamp: metav1.NewTime(f.now.Add(time.Duration(*tr.Spec.ExpirationSeconds) * time.Second))}
	return out, nil
}

func TestRefreshPolicy(t *testing.T) {
	api := &fakeAPI{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	m := New(api.request, func() time.Time { return api.now })
	spec := authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600), Audiences: []string{"api"},
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", Name: "p", UID: "u1"}}
	get := func() string {
		t.Helper()
		tr, err := m.ServiceAccountToken(context.Background(), "ns", "default", spec)
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	first := get()
	api.now = api.now.Add(7 * time.Minute) // 70 % of ten minutes
	if got := get(); got != first || api.calls != 1 {
		t.Fatalf("fresh token: %q after %d requests, want %q from 1", got, api.calls, first)
	}
	api.now = api.now.Add(90 * time.Second) // 85 %
	second := get()
	if second == first || api.calls != 2 {
		t.Fatalf("token near expiry not refreshed: %q, %d requests", second, api.calls)
	}
	// Another pod (uid) is another token.
	spec.BoundObjectRef.UID = "u2"
	if got := get(); got == second || api.calls != 3 {
		t.Fatalf("another pod shared a token: %q, %d requests", got, api.calls)
	}
	spec.BoundObjectRef.UID = "u1"
	// The API server down: the cached token, still valid, is served; once
	// it has expired, the error.
	api.fail = true
	api.now = api.now.Add(8*time.Minute + 30*time.Second) // 85 % of the second token
	if got := get(); got != second {
		t.Fatalf("with the API down: %q, want the cached %q", got, second)
	}
	api.now = api.now.Add(2 * time.Minute)
	if _, err := m.ServiceAccountToken(context.Background(), "ns", "default", spec); err == nil {
		t.Fatal("an expired token served with the API down")
	}
	// A two-day token is used for a day at most.
	api.fail = false
	spec.ExpirationSeconds = ptr.To[int64](48 * 3600)
	day := get()
	api.now = api.now.Add(23 * time.Hour)
	if get() != day {
		t.Fatal("a two-day token refreshed within its first day")
	}
	api.now = api.now.Add(2 * time.Hour)
	if get() == day {
		t.Fatal("a two-day token used past 24 hours")
	}
}
