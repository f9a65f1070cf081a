package apiserver

import (
	"context"
	"net/url"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/controlplane/registry"
	"github.com/nodelet/nodelet/controlplane/storage"
)

// TestPodFieldLabelConversion: pods' field selectors take upstream's
// field label conversion: spec.host selects on spec.nodeName, and
// status.podIPs is accepted and empty on every pod (upstream's selectable
// fields leave it out); another field is still a 400.
func TestPodFieldLabelConversion(t *testing.T) {
	var pods *registry.Resource
	for _, r := range registry.All() {
		if r.GroupVersion.Group == "" && r.Name == "pods" {
			pods = r
		}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{PodIPs: []corev1.PodIP{{IP: "10.1.0.7"}}}}
	for sel, want := range map[string]bool{
		"spec.host=n1": true, "spec.host!=n1": false, "spec.host=n2,metadata.name=p": false,
		"status.podIPs=": true, "status.podIPs=10.1.0.7": false, "status.podIP=10.1.0.7": true,
	} {
		m, err := newMatcher(pods, url.Values{"fieldSelector": {sel}})
		if err != nil {
			t.Errorf("%s: %v", sel, err)
			continue
		}
		if got := m.matches(pod); got != want {
			t.Errorf("%s matches %v, want %v", sel, got, want)
		}
	}
	if _, err := newMatcher(pods, url.Values{"fieldSelector": {"spec.hosts=n1"}}); err == nil {
		t.Error("spec.hosts=n1: accepted")
	}
}

// TestContinueNegativeRevision: a continue token of a negative revision
// lists at the latest one, as upstream's, and never answers a
// resourceVersion a watch would refuse: it answered "-1" to a seed of
// FuzzListQuery.
func TestContinueNegativeRevision(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	cms := env.clientset(t).CoreV1().ConfigMaps("default")
	ctx := context.Background()
	for _, name := range []string{"a", "b"} {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var res *registry.Resource
	for _, r := range registry.All() {
		if r.GroupVersion.Group == "" && r.Name == "configmaps" {
			res = r
		}
	}
	list, err := cms.List(ctx, metav1.ListOptions{Limit: 1, Continue: encodeContinue(-1, listPrefix(res, "default"))})
	if err != nil {
		t.Fatal(err)
	}
	if rv, err := strconv.ParseInt(list.ResourceVersion, 10, 64); err != nil || rv <= 0 || len(list.Items) != 1 || list.Items[0].Name != "a" {
		t.Fatalf("listed %d items at resourceVersion %q", len(list.Items), list.ResourceVersion)
	}
}
