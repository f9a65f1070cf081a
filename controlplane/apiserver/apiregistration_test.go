package apiserver

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	"github.com/nodelet/nodelet/controlplane/storage"
)

// TestAPIServices: apiregistration.k8s.io/v1 with kube-aggregator's
// strategy and validation: a local APIService is Available at once, one
// naming a Service starts without status, the port defaults to 443,
// status is kept by updates of the main resource, bad names are refused.
func TestAPIServices(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	client, err := aggregatorclient.NewForConfig(env.config)
	if err != nil {
		t.Fatal(err)
	}
	apis := client.ApiregistrationV1().APIServices()
	ctx := context.Background()

	local, err := apis.Create(ctx, &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v1.example.com"},
		Spec:       apiregistrationv1.APIServiceSpec{Group: "example.com", Version: "v1", GroupPriorityMinimum: 100, VersionPriority: 10},
		Status: apiregistrationv1.APIServiceStatus{Conditions: []apiregistrationv1.APIServiceCondition{
			{Type: apiregistrationv1.Available, Status: apiregistrationv1.ConditionFalse, Reason: "Sent"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := local.Status.Conditions; len(c) != 1 || c[0].Status != apiregistrationv1.ConditionTrue || c[0].Reason != "Local" {
		t.Fatalf("local APIService status %+v, want Available True (Local)", local.Status)
	}

	remote, err := apis.Create(ctx, &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v1beta1.remote.example.com"},
		Spec: apiregistrationv1.APIServiceSpec{Group: "remote.example.com", Version: "v1beta1",
			Service:               &apiregistrationv1.ServiceReference{Namespace: "kube-system", Name: "remote"},
			InsecureSkipTLSVerify: true, GroupPriorityMinimum: 100, VersionPriority: 10},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(remote.Status.Conditions) != 0 || remote.Spec.Service.Port == nil || *remote.Spec.Service.Port != 443 {
		t.Fatalf("remote APIService: status %+v, port %v", remote.Status, remote.Spec.Service.Port)
	}
	remote.Status.Conditions = []apiregistrationv1.APIServiceCondition{{Type: apiregistrationv1.Available,
		Status: apiregistrationv1.ConditionFalse, Reason: "MissingEndpoints", LastTransitionTime: metav1.Now()}}
	if remote, err = apis.UpdateStatus(ctx, remote, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	remote.Spec.VersionPriority = 20
	remote.Status.Conditions = nil
	if remote, err = apis.Update(ctx, remote, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if remote.Spec.VersionPriority != 20 || len(remote.Status.Conditions) != 1 || remote.Status.Conditions[0].Reason != "MissingEndpoints" {
		t.Fatalf("update of the main resource: spec %+v status %+v", remote.Spec, remote.Status)
	}

	_, err = apis.Create(ctx, &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v2.wrong.example.com"},
		Spec:       apiregistrationv1.APIServiceSpec{Group: "example.com", Version: "v1", GroupPriorityMinimum: 100, VersionPriority: 10},
	}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `"v1.example.com"`) {
		t.Fatalf("create with a name not matching its group-version: %v, want 422", err)
	}
}
