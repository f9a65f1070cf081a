package registry

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
)

func serviceResource() *Resource {
	return &Resource{
		GroupVersion: corev1.SchemeGroupVersion,
		Name:         "services",
		Kind:         "Service",
		ListKind:     "ServiceList",
		Namespaced:   true,
		ShortNames:   []string{"svc"},
		Categories:   []string{"all"},
		Verbs:        verbsWithoutDeleteCollection(),
		New:          func() runtime.Object { return &corev1.Service{} },
		NewList:      func() runtime.Object { return &corev1.ServiceList{} },
		// proxy reaches a ready endpoint through the API server.
		Subresources: []string{"status", "proxy"},

		Default:          mutate(defaultService),
		PrepareForCreate: mutate(prepareServiceForCreate),
		PrepareForUpdate: mutate2(prepareServiceForUpdate),
		PrepareForStatusUpdate: mutate2(func(svc, old *corev1.Service) {
			svc.Spec = *old.Spec.DeepCopy()
			keepMetaForStatus(&svc.ObjectMeta, &old.ObjectMeta)
		}),

		Fields: selectable(func(svc *corev1.Service) fields.Set {
			return fields.Set{"spec.clusterIP": svc.Spec.ClusterIP, "spec.type": string(svc.Spec.Type)}
		}),
		Columns: serviceColumns(),
		Row:     row(serviceRow),
	}
}

// defaultService applies upstream's SetDefaults_Service, plus the IP family
// policy that upstream's service storage defaults before allocating: a
// headless service without selector may get both families
// (RequireDualStack), every other service gets SingleStack.
func defaultService(svc *corev1.Service) {
	spec := &svc.Spec
	if spec.SessionAffinity == "" {
		spec.SessionAffinity = corev1.ServiceAffinityNone
	}
	if spec.SessionAffinity == corev1.ServiceAffinityNone {
		spec.SessionAffinityConfig = nil
	}
	if spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		c := spec.SessionAffinityConfig
		if c == nil || c.ClientIP == nil || c.ClientIP.TimeoutSeconds == nil {
			spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{
				ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To(corev1.DefaultClientIPServiceAffinitySeconds)},
			}
		}
	}
	if spec.Type == "" {
		spec.Type = corev1.ServiceTypeClusterIP
	}
	for i := range spec.Ports {
		p := &spec.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if p.TargetPort == intstr.FromInt32(0) || p.TargetPort == intstr.FromString("") {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
	external := spec.Type == corev1.ServiceTypeLoadBalancer || spec.Type == corev1.ServiceTypeNodePort ||
		spec.Type == corev1.ServiceTypeClusterIP && len(spec.ExternalIPs) > 0
	if external && spec.ExternalTrafficPolicy == "" {
		spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
	if spec.InternalTrafficPolicy == nil && spec.Type != corev1.ServiceTypeExternalName {
		spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyCluster)
	}
	if spec.Type == corev1.ServiceTypeLoadBalancer && spec.AllocateLoadBalancerNodePorts == nil {
		spec.AllocateLoadBalancerNodePorts = ptr.To(true)
	}
	if spec.Type == corev1.ServiceTypeLoadBalancer {
		for i, ing := range svc.Status.LoadBalancer.Ingress {
			if ing.IP != "" && ing.IPMode == nil {
				svc.Status.LoadBalancer.Ingress[i].IPMode = ptr.To(corev1.LoadBalancerIPModeVIP)
			}
		}
	}
	if spec.IPFamilyPolicy == nil && spec.Type != corev1.ServiceTypeExternalName {
		policy := corev1.IPFamilyPolicySingleStack
		if spec.ClusterIP == corev1.ClusterIPNone && len(spec.Selector) == 0 {
			policy = corev1.IPFamilyPolicyRequireDualStack
		}
		spec.IPFamilyPolicy = &policy
	}
}

// prepareServiceForCreate clears the status and fills clusterIPs from the
// singular clusterIP an older client may have set alone.
func prepareServiceForCreate(svc *corev1.Service) {
	svc.Status = corev1.ServiceStatus{}
	if svc.Spec.ClusterIP != "" && len(svc.Spec.ClusterIPs) == 0 {
		svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
	}
}

// prepareServiceForUpdate keeps the status and the values the server
// allocated (cluster IPs, IP families, node ports, health-check node port)
// when the client left them out, as upstream's service storage does; a
// client switching to ExternalName drops the allocated IPs instead.
func prepareServiceForUpdate(svc, old *corev1.Service) {
	svc.Status = *old.Status.DeepCopy()
	spec, oldSpec := &svc.Spec, &old.Spec
	if spec.ClusterIP != "" && len(spec.ClusterIPs) == 0 && spec.ClusterIP == oldSpec.ClusterIP {
		spec.ClusterIPs = append([]string(nil), oldSpec.ClusterIPs...)
	}
	if spec.Type == corev1.ServiceTypeExternalName && oldSpec.Type != corev1.ServiceTypeExternalName {
		if spec.ClusterIP == oldSpec.ClusterIP {
			spec.ClusterIP, spec.ClusterIPs, spec.IPFamilies, spec.IPFamilyPolicy = "", nil, nil, nil
		}
		return
	}
	if oldSpec.Type == corev1.ServiceTypeExternalName || spec.Type == corev1.ServiceTypeExternalName {
		return
	}
	if spec.ClusterIP == "" && len(spec.ClusterIPs) == 0 {
		spec.ClusterIP = oldSpec.ClusterIP
		spec.ClusterIPs = append([]string(nil), oldSpec.ClusterIPs...)
	}
	if len(spec.IPFamilies) == 0 {
		spec.IPFamilies = append([]corev1.IPFamily(nil), oldSpec.IPFamilies...)
	}
	if needsNodePorts(svc) && needsNodePorts(old) {
		patchNodePorts(spec.Ports, oldSpec.Ports)
	}
	if spec.HealthCheckNodePort == 0 && spec.Type == corev1.ServiceTypeLoadBalancer &&
		spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
		spec.HealthCheckNodePort = oldSpec.HealthCheckNodePort
	}
}

func needsNodePorts(svc *corev1.Service) bool {
	switch svc.Spec.Type {
	case corev1.ServiceTypeNodePort:
		return true
	case corev1.ServiceTypeLoadBalancer:
		return svc.Spec.AllocateLoadBalancerNodePorts == nil || *svc.Spec.AllocateLoadBalancerNodePorts
	}
	return false
}

// patchNodePorts gives ports without a node port the one the old port of the
// same name had, unless another new port already uses it.
func patchNodePorts(ports, old []corev1.ServicePort) {
	used := sets.New[int32]()
	for _, p := range ports {
		used.Insert(p.NodePort)
	}
	byName := map[string]int32{}
	for _, p := range old {
		byName[p.Name] = p.NodePort
	}
	for i := range ports {
		if ports[i].NodePort == 0 {
			if np := byName[ports[i].Name]; np != 0 && !used.Has(np) {
				ports[i].NodePort = np
				used.Insert(np)
			}
		}
	}
}
