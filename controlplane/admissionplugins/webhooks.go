package admissionplugins

import (
	"fmt"
	"net"
	"net/url"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/admission"
	validatingpolicy "k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	mutatingwebhook "k8s.io/apiserver/pkg/admission/plugin/webhook/mutating"
	validatingwebhook "k8s.io/apiserver/pkg/admission/plugin/webhook/validating"
	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/informers"
	corev1listers "k8s.io/client-go/listers/core/v1"
)

// clusterIPResolver sends a webhook named by its Service to the
// Service's cluster IP, as kube-apiserver does by default (the
// aggregator's ClusterIP resolver, --enable-aggregator-routing=false):
// the control plane's host reaches cluster IPs through the node's proxy.
// The TLS server name stays <name>.<namespace>.svc.
type clusterIPResolver struct{ services corev1listers.ServiceLister }

func (r clusterIPResolver) ResolveEndpoint(namespace, name string, port int32) (*url.URL, error) {
	svc, err := r.services.Services(namespace).Get(name)
	if err != nil {
		return nil, fmt.Errorf("resolve service %s/%s: %w", namespace, name, err)
	}
	hostPort := func(host string) *url.URL {
		return &url.URL{Scheme: "https", Host: net.JoinHostPort(host, strconv.Itoa(int(port)))}
	}
	switch svc.Spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
		if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
			return nil, fmt.Errorf("service %s/%s has no cluster IP", namespace, name)
		}
		for _, p := range svc.Spec.Ports {
			if p.Port == port {
				return hostPort(svc.Spec.ClusterIP), nil
			}
		}
		return nil, fmt.Errorf("service %s/%s has no port %d", namespace, name, port)
	case corev1.ServiceTypeExternalName:
		return hostPort(svc.Spec.ExternalName), nil
	}
	return nil, fmt.Errorf("service %s/%s: unsupported type %q", namespace, name, svc.Spec.Type)
}

// configuredReaches are the reaches of the webhook and policy plugins:
// any request, but only once some configuration exists, read from the
// informers the plugins share. Until a cluster has a webhook or a policy
// binding, they cost no conversion.
func configuredReaches(f informers.SharedInformerFactory) map[string]func(admission.Attributes) bool {
	reg := f.Admissionregistration().V1()
	mutating, validating := reg.MutatingWebhookConfigurations().Lister(), reg.ValidatingWebhookConfigurations().Lister()
	bindings := reg.ValidatingAdmissionPolicyBindings().Lister()
	return map[string]func(admission.Attributes) bool{
		mutatingwebhook.PluginName: func(admission.Attributes) bool {
			l, err := mutating.List(labels.Everything())
			return err != nil || len(l) > 0
		},
		validatingwebhook.PluginName: func(admission.Attributes) bool {
			l, err := validating.List(labels.Everything())
			return err != nil || len(l) > 0
		},
		validatingpolicy.PluginName: func(admission.Attributes) bool {
			l, err := bindings.List(labels.Everything())
			return err != nil || len(l) > 0
		},
	}
}

// ServiceResolver is the resolver the webhook plugins use (a Service's
// cluster IP), for other webhook callers of the control plane (CRD
// conversion webhooks).
func ServiceResolver(services corev1listers.ServiceLister) webhook.ServiceResolver {
	return clusterIPResolver{services: services}
}
