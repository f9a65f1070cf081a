package apiserver

import (
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

// newProtobufSerializer returns the codec for Kubernetes protobuf, the
// wire format client-go prefers for built-in types. Its scheme knows the
// served groups and versions, DeleteOptions in each of them, and
// autoscaling/v1 Scale.
func newProtobufSerializer() (runtime.Serializer, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, authenticationv1.AddToScheme, authorizationv1.AddToScheme, coordinationv1.AddToScheme,
		discoveryv1.AddToScheme, autoscalingv1.AddToScheme, autoscalingv2.AddToScheme,
		eventsv1.AddToScheme, flowcontrolv1.AddToScheme, batchv1.AddToScheme, admissionregistrationv1.AddToScheme,
		policyv1.AddToScheme, rbacv1.AddToScheme, schedulingv1.AddToScheme, storagev1.AddToScheme, nodev1.AddToScheme,
		apiregistrationv1.AddToScheme, apiextensionsv1.AddToScheme, certificatesv1.AddToScheme, metav1.AddMetaToScheme,
	} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("build scheme: %w", err)
		}
	}
	metav1.AddToGroupVersion(scheme, metav1.SchemeGroupVersion)
	return protobuf.NewSerializer(scheme, scheme), nil
}
