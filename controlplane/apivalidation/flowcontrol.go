package apivalidation

import (
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kubernetes/pkg/apis/flowcontrol"
	flowcontrolvalidation "k8s.io/kubernetes/pkg/apis/flowcontrol/validation"
)

// validateFlowControl runs upstream's FlowSchema and
// PriorityLevelConfiguration strategy validation; old is nil for a
// create. A level's update is validated as a create, as upstream's.
func validateFlowControl(obj, old runtime.Object, status bool) (field.ErrorList, bool) {
	switch o := obj.(type) {
	case *flowcontrol.FlowSchema:
		switch {
		case old == nil:
			return flowcontrolvalidation.ValidateFlowSchema(o), true
		case status:
			return flowcontrolvalidation.ValidateFlowSchemaStatusUpdate(old.(*flowcontrol.FlowSchema), o), true
		default:
			return flowcontrolvalidation.ValidateFlowSchemaUpdate(old.(*flowcontrol.FlowSchema), o), true
		}
	case *flowcontrol.PriorityLevelConfiguration:
		opts := flowcontrolvalidation.PriorityLevelValidationOptions{}
		switch {
		case old == nil:
			return flowcontrolvalidation.ValidatePriorityLevelConfiguration(o, flowcontrolv1.SchemeGroupVersion, opts), true
		case status:
			return flowcontrolvalidation.ValidatePriorityLevelConfigurationStatusUpdate(old.(*flowcontrol.PriorityLevelConfiguration), o), true
		default:
			return flowcontrolvalidation.ValidatePriorityLevelConfiguration(o, flowcontrolv1.SchemeGroupVersion, opts), true
		}
	}
	return nil, false
}
