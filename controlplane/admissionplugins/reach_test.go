package admissionplugins

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

// TestReach: the default chain reads pods and nodes of anyone and
// anything of a node, and nothing else (a user's ConfigMap is not even
// converted; NamespaceLifecycle reads no object); a plugin the table does
// not name reaches everything.
func TestReach(t *testing.T) {
	// resource may name a subresource: pods/status.
	attrs := func(resource, who string, groups ...string) admission.Attributes {
		resource, sub, _ := strings.Cut(resource, "/")
		return admission.NewAttributesRecord(nil, nil, schema.GroupVersionKind{}, "ns", "n",
			schema.GroupVersionResource{Version: "v1", Resource: resource}, sub, admission.Create, nil, false,
			&user.DefaultInfo{Name: who, Groups: groups})
	}
	// No webhook configuration or policy binding exists: an informer
	// factory that never lists holds none.
	reach := configuredReaches(informers.NewSharedInformerFactory(fake.NewClientset(), 0))
	for name, r := range reaches {
		reach[name] = r
	}
	segments := plan(DefaultPlugins, reach)
	if len(segments) != 3 || segments[0].convert || !segments[1].convert || segments[2].convert {
		t.Fatalf("segments %+v: want lifecycle, the converting plugins, then ResourceQuota", segments)
	}
	converted := func(a admission.Attributes) bool {
		for _, s := range segments {
			if s.convert && s.reached(a) {
				return true
			}
		}
		return false
	}
	for _, tc := range []struct {
		a    admission.Attributes
		want bool
	}{
		{attrs("configmaps", "jane"), false},
		{attrs("pods", "jane"), true},
		{attrs("pods/ephemeralcontainers", "jane"), true},
		{attrs("pods/status", "jane"), false},
		{attrs("pods/binding", "system:kube-scheduler"), false},
		{attrs("persistentvolumeclaims", "jane"), true}, // LimitRanger
		{attrs("configmaps", "system:node:n1", user.NodesGroup), true},
		{attrs("nodes", "system:node:n1", user.NodesGroup), true},
		{attrs("configmaps", "system:node:n1"), false}, // not in system:nodes: not a node
		{attrs("nodes", "jane"), true},                 // TaintNodesByCondition
	} {
		if got := converted(tc.a); got != tc.want {
			t.Errorf("%s by %s %v: reached %v, want %v", tc.a.GetResource().Resource, tc.a.GetUserInfo().GetName(),
				tc.a.GetUserInfo().GetGroups(), got, tc.want)
		}
	}
	if !(segment{convert: true, reach: []func(admission.Attributes) bool{nil}}).reached(attrs("configmaps", "jane")) {
		t.Errorf("a plugin outside the table does not reach every request")
	}
}
