package aggregator

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

func TestPlanLocal(t *testing.T) {
	core := schema.GroupVersion{Version: "v1"}
	apps := schema.GroupVersion{Group: "apps", Version: "v1"}
	metrics := schema.GroupVersion{Group: "metrics.k8s.io", Version: "v1beta1"}
	widgets := schema.GroupVersion{Group: "example.com", Version: "v1"}

	drifted := localAPIService(apps)
	drifted.Spec.VersionPriority = 99
	taken := localAPIService(metrics)
	taken.Spec.Service = &apiregistrationv1.ServiceReference{Namespace: "kube-system", Name: "metrics-server"}
	gone := localAPIService(widgets)
	users := &apiregistrationv1.APIService{}
	users.Name = "v1.users.example.com"

	p := planLocal([]schema.GroupVersion{core, apps, metrics}, []*apiregistrationv1.APIService{drifted, taken, gone, users})
	if len(p.create) != 1 || p.create[0].Name != "v1." || p.create[0].Spec.GroupPriorityMinimum != corePriority {
		t.Errorf("create %+v, want v1. only", p.create)
	}
	if len(p.update) != 1 || p.update[0].Name != "v1.apps" || p.update[0].Spec.VersionPriority != versionPriority {
		t.Errorf("update %+v, want v1.apps put back", p.update)
	}
	if !reflect.DeepEqual(p.remove, []string{"v1.example.com"}) {
		t.Errorf("remove %v, want the CRD version no longer served (and not the user's)", p.remove)
	}

	// The user's metrics-server APIService deleted: the local one returns.
	p = planLocal([]schema.GroupVersion{metrics}, nil)
	if len(p.create) != 1 || p.create[0].Name != "v1beta1.metrics.k8s.io" || p.create[0].Spec.Service != nil {
		t.Errorf("create %+v, want the local metrics APIService", p.create)
	}
}
