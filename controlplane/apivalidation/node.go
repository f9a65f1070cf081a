package apivalidation

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	nodeutil "k8s.io/kubernetes/pkg/api/node"
	"k8s.io/kubernetes/pkg/apis/node"
	nodevalidation "k8s.io/kubernetes/pkg/apis/node/validation"
)

// validateNodeGroup runs upstream's RuntimeClass strategy validation
// (pkg/registry/node/runtimeclass): an update is validated as a create
// too, then for its immutable handler. old is nil for a create.
func validateNodeGroup(obj, old runtime.Object) (field.ErrorList, bool) {
	rc, ok := obj.(*node.RuntimeClass)
	if !ok {
		return nil, false
	}
	errs := nodevalidation.ValidateRuntimeClass(rc)
	if old != nil {
		errs = append(errs, nodevalidation.ValidateRuntimeClassUpdate(rc, old.(*node.RuntimeClass))...)
	}
	return errs, true
}

// nodeGroupWarnings are upstream's RuntimeClass warnings (deprecated node
// labels in its scheduling nodeSelector), the same on create and update.
func nodeGroupWarnings(obj runtime.Object) ([]string, bool) {
	rc, ok := obj.(*node.RuntimeClass)
	if !ok {
		return nil, false
	}
	return nodeutil.GetWarningsForRuntimeClass(rc), true
}
