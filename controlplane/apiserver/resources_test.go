package apiserver

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nodelet/nodelet/controlplane/registry"
)

func TestResourceTableOwnedSets(t *testing.T) {
	builtin := &registry.Resource{GroupVersion: schema.GroupVersion{Group: "apps", Version: "v1"}, Name: "deployments"}
	table := newResourceTable([]*registry.Resource{builtin})
	before := table.snapshot()

	gv := schema.GroupVersion{Group: "example.com", Version: "v1"}
	widgets := &registry.Resource{GroupVersion: gv, Name: "widgets"}
	shadow := &registry.Resource{GroupVersion: builtin.GroupVersion, Name: "deployments"}
	table.set("widgets.example.com", []*registry.Resource{widgets, shadow})
	select {
	case <-before.replaced:
	default:
		t.Fatal("the replaced snapshot's channel is still open")
	}

	now := table.snapshot()
	if got := now.lookup(gv, "widgets"); got != widgets {
		t.Fatalf("lookup widgets = %v, want the owned resource", got)
	}
	if got := now.lookup(builtin.GroupVersion, "deployments"); got != builtin {
		t.Fatalf("an owned resource replaced the built-in deployments")
	}
	if got := now.byGR[schema.GroupResource{Group: "example.com", Resource: "widgets"}]; got != widgets {
		t.Fatalf("byGR widgets = %v", got)
	}
	if before.lookup(gv, "widgets") != nil {
		t.Fatalf("an earlier snapshot changed")
	}

	table.set("widgets.example.com", nil)
	if table.snapshot().lookup(gv, "widgets") != nil || table.snapshot().byGV[gv] != nil {
		t.Fatalf("widgets still served after their owner removed them")
	}
}
