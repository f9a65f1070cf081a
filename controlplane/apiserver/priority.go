package apiserver

import (
	"errors"

	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/nodelet/nodelet/controlplane/apivalidation"
	"github.com/nodelet/nodelet/controlplane/registry"
)

// Pods' priorities and the one globalDefault class are upstream's
// Priority admission plugin's (admissionplugins); deleting a system class
// is refused by upstream's priorityclasses REST, so here.

// refuseSystemClassDelete refuses to delete upstream's system priority
// classes (system-node-critical, system-cluster-critical), as upstream's
// priorityclasses REST does.
func refuseSystemClassDelete(res *registry.Resource, name string) error {
	if res.GroupVersion.Group != schedulingv1.GroupName || res.Name != "priorityclasses" {
		return nil
	}
	for _, pc := range apivalidation.SystemPriorityClasses() {
		if pc.Name == name {
			return apierrors.NewForbidden(schedulingv1.Resource("priorityclasses"), name,
				errors.New("this is a system priority class and cannot be deleted"))
		}
	}
	return nil
}
