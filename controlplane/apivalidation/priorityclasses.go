package apivalidation

import (
	schedulingv1 "k8s.io/api/scheduling/v1"
	schedulingapiv1 "k8s.io/kubernetes/pkg/apis/scheduling/v1"
)

// SystemPriorityClasses returns upstream's built-in priority classes
// (system-node-critical and system-cluster-critical), fresh copies that
// kube-apiserver creates at start when missing.
func SystemPriorityClasses() []*schedulingv1.PriorityClass {
	return schedulingapiv1.SystemPriorityClasses()
}
