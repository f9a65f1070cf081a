package admissionplugins

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
)

// TestReach: the default chain reads pods of anyone and anything of a
// node, and nothing else (a user's ConfigMap is not even converted); a
// plugin the table does not name reaches everything.
func TestReach(t *testing.T) {
	attrs := func(resource, who string, groups ...string) admission.Attributes {
		return admission.NewAttributesRecord(nil, nil, schema.GroupVersionKind{}, "ns", "n",
			schema.GroupVersionResource{Version: "v1", Resource: resource}, "", admission.Create, nil, false,
			&user.DefaultInfo{Name: who, Groups: groups})
	}
	c := &Chain{}
	for _, n := range DefaultPlugins {
		c.reach = append(c.reach, reaches[n])
	}
	for _, tc := range []struct {
		a    admission.Attributes
		want bool
	}{
		{attrs("configmaps", "jane"), false},
		{attrs("pods", "jane"), true},
		{attrs("configmaps", "system:node:n1", user.NodesGroup), true},
		{attrs("nodes", "system:node:n1", user.NodesGroup), true},
		{attrs("nodes", "system:node:n1"), false}, // not in system:nodes: not a node
	} {
		if got := c.reached(tc.a); got != tc.want {
			t.Errorf("%s by %s %v: reached %v, want %v", tc.a.GetResource().Resource, tc.a.GetUserInfo().GetName(),
				tc.a.GetUserInfo().GetGroups(), got, tc.want)
		}
	}
	c.reach = append(c.reach, nil)
	if !c.reached(attrs("configmaps", "jane")) {
		t.Errorf("a plugin outside the table does not reach every request")
	}
}
