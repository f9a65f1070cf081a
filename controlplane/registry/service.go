package registry

import (
	"fmt"
	"net"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// kubeletPort may not be exposed by a load balancer (upstream's
// ports.KubeletPort).
const kubeletPort = 10250

// maxClientIPAffinitySeconds caps sessionAffinityConfig.clientIP.timeoutSeconds
// (one day, upstream's MaxClientIPServiceAffinitySeconds).
const maxClientIPAffinitySeconds = 86400

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
		Subresources: []string{"status"},

		Default:          mutate(defaultService),
		PrepareForCreate: mutate(prepareServiceForCreate),
		PrepareForUpdate: mutate2(prepareServiceForUpdate),
		PrepareForStatusUpdate: mutate2(func(svc, old *corev1.Service) {
			svc.Spec = *old.Spec.DeepCopy()
			keepMetaForStatus(&svc.ObjectMeta, &old.ObjectMeta)
		}),
		Validate:             validate(validateService),
		ValidateUpdate:       validate2(validateServiceUpdate),
		ValidateStatusUpdate: validate2(validateServiceStatusUpdate),
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

func isHeadless(svc *corev1.Service) bool {
	return len(svc.Spec.ClusterIPs) == 1 && svc.Spec.ClusterIPs[0] == corev1.ClusterIPNone
}

// validateService follows upstream's ValidateService; names are DNS-1035
// labels (they become DNS names and environment variable prefixes).
func validateService(svc *corev1.Service) field.ErrorList {
	errs := validateMeta(svc, true, apivalidation.NameIsDNS1035Label)
	return append(errs, validateServiceSpec(svc)...)
}

func validateServiceSpec(svc *corev1.Service) field.ErrorList {
	var errs field.ErrorList
	spec, specPath := &svc.Spec, field.NewPath("spec")
	if len(spec.Ports) == 0 && !isHeadless(svc) && spec.Type != corev1.ServiceTypeExternalName {
		errs = append(errs, field.Required(specPath.Child("ports"), ""))
	}
	errs = append(errs, validateServiceType(svc, specPath)...)
	errs = append(errs, validateServicePorts(svc, specPath.Child("ports"))...)
	if spec.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabels(spec.Selector, specPath.Child("selector"))...)
	}
	switch spec.SessionAffinity {
	case corev1.ServiceAffinityNone:
		if spec.SessionAffinityConfig != nil {
			errs = append(errs, field.Forbidden(specPath.Child("sessionAffinityConfig"), "must not be set when session affinity is None"))
		}
	case corev1.ServiceAffinityClientIP:
		errs = append(errs, validateClientIPAffinity(spec.SessionAffinityConfig, specPath.Child("sessionAffinityConfig"))...)
	case "":
		errs = append(errs, field.Required(specPath.Child("sessionAffinity"), ""))
	default:
		errs = append(errs, field.NotSupported(specPath.Child("sessionAffinity"), spec.SessionAffinity,
			[]corev1.ServiceAffinity{corev1.ServiceAffinityClientIP, corev1.ServiceAffinityNone}))
	}
	errs = append(errs, validateClusterIPs(svc, specPath)...)
	for i, ip := range spec.ExternalIPs {
		errs = append(errs, validateNonSpecialIP(ip, specPath.Child("externalIPs").Index(i))...)
	}
	return append(errs, validateTrafficPolicies(svc, specPath)...)
}

func validateServiceType(svc *corev1.Service, specPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	spec := &svc.Spec
	switch spec.Type {
	case corev1.ServiceTypeClusterIP:
		for i, p := range spec.Ports {
			if p.NodePort != 0 {
				errs = append(errs, field.Forbidden(specPath.Child("ports").Index(i).Child("nodePort"), "may not be used when `type` is 'ClusterIP'"))
			}
		}
	case corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
		if isHeadless(svc) {
			errs = append(errs, field.Invalid(specPath.Child("clusterIPs").Index(0), spec.ClusterIPs[0],
				fmt.Sprintf("may not be set to 'None' for %s services", spec.Type)))
		}
		for i, p := range spec.Ports {
			if spec.Type == corev1.ServiceTypeLoadBalancer && p.Port == kubeletPort {
				errs = append(errs, field.Invalid(specPath.Child("ports").Index(i), p.Port,
					fmt.Sprintf("may not expose port %v externally since it is used by kubelet", kubeletPort)))
			}
		}
	case corev1.ServiceTypeExternalName:
		if len(spec.ClusterIPs) > 0 {
			errs = append(errs, field.Forbidden(specPath.Child("clusterIPs"), "may not be set for ExternalName services"))
		}
		if len(spec.IPFamilies) > 0 {
			errs = append(errs, field.Forbidden(specPath.Child("ipFamilies"), "may not be set for ExternalName services"))
		}
		if spec.IPFamilyPolicy != nil {
			errs = append(errs, field.Forbidden(specPath.Child("ipFamilyPolicy"), "may not be set for ExternalName services"))
		}
		// A trailing dot only marks the name as fully qualified.
		if name := trimDot(spec.ExternalName); name != "" {
			errs = append(errs, dns1123Subdomain(name, specPath.Child("externalName"))...)
		} else {
			errs = append(errs, field.Required(specPath.Child("externalName"), ""))
		}
	case "":
		errs = append(errs, field.Required(specPath.Child("type"), ""))
	default:
		errs = append(errs, field.NotSupported(specPath.Child("type"), spec.Type, []corev1.ServiceType{
			corev1.ServiceTypeClusterIP, corev1.ServiceTypeExternalName, corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeNodePort}))
	}
	return errs
}

func trimDot(s string) string {
	if len(s) > 0 && s[len(s)-1] == '.' {
		return s[:len(s)-1]
	}
	return s
}

// validateServicePorts: names are DNS labels, unique, and required when there
// is more than one port; (protocol, port) and (protocol, nodePort) pairs are
// unique.
func validateServicePorts(svc *corev1.Service, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	ports := svc.Spec.Ports
	names := sets.New[string]()
	type key struct {
		proto corev1.Protocol
		port  int32
	}
	seen, nodePorts := map[key]bool{}, map[key]bool{}
	for i, p := range ports {
		pp := path.Index(i)
		if len(ports) > 1 && p.Name == "" {
			errs = append(errs, field.Required(pp.Child("name"), ""))
		} else if p.Name != "" {
			errs = append(errs, dns1123Label(p.Name, pp.Child("name"))...)
			if names.Has(p.Name) {
				errs = append(errs, field.Duplicate(pp.Child("name"), p.Name))
			}
			names.Insert(p.Name)
		}
		for _, msg := range validation.IsValidPortNum(int(p.Port)) {
			errs = append(errs, field.Invalid(pp.Child("port"), p.Port, msg))
		}
		errs = append(errs, validateProtocol(p.Protocol, pp.Child("protocol"))...)
		errs = append(errs, validatePortNumOrName(p.TargetPort, pp.Child("targetPort"))...)
		if p.AppProtocol != nil {
			errs = append(errs, qualifiedName(*p.AppProtocol, pp.Child("appProtocol"))...)
		}
		if p.NodePort != 0 {
			if nodePorts[key{p.Protocol, p.NodePort}] {
				errs = append(errs, field.Duplicate(pp.Child("nodePort"), p.NodePort))
			}
			nodePorts[key{p.Protocol, p.NodePort}] = true
		}
		if seen[key{p.Protocol, p.Port}] {
			errs = append(errs, field.Duplicate(pp, corev1.ServicePort{Protocol: p.Protocol, Port: p.Port}))
		}
		seen[key{p.Protocol, p.Port}] = true
	}
	return errs
}

func validateClientIPAffinity(cfg *corev1.SessionAffinityConfig, path *field.Path) field.ErrorList {
	if cfg == nil || cfg.ClientIP == nil || cfg.ClientIP.TimeoutSeconds == nil {
		return field.ErrorList{field.Required(path.Child("clientIP", "timeoutSeconds"), "must be specified when session affinity is ClientIP")}
	}
	if t := *cfg.ClientIP.TimeoutSeconds; t <= 0 || t > maxClientIPAffinitySeconds {
		return field.ErrorList{field.Invalid(path.Child("clientIP", "timeoutSeconds"), t,
			fmt.Sprintf("must be greater than 0 and less than %d", maxClientIPAffinitySeconds))}
	}
	return nil
}

// validateClusterIPs keeps clusterIP and clusterIPs in step and checks the IPs
// and families: "None" only alone, at most one IP per family.
func validateClusterIPs(svc *corev1.Service, specPath *field.Path) field.ErrorList {
	spec := &svc.Spec
	if spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	var errs field.ErrorList
	ipsPath := specPath.Child("clusterIPs")
	switch {
	case spec.ClusterIP != "" && len(spec.ClusterIPs) == 0:
		errs = append(errs, field.Required(ipsPath, ""))
	case spec.ClusterIP != "" && spec.ClusterIPs[0] != spec.ClusterIP:
		errs = append(errs, field.Invalid(ipsPath, spec.ClusterIPs, "first value must match `clusterIP`"))
	case spec.ClusterIP == "" && len(spec.ClusterIPs) != 0:
		errs = append(errs, field.Invalid(ipsPath, spec.ClusterIPs, "must be empty when `clusterIP` is not specified"))
	}
	seen := sets.New[corev1.IPFamily]()
	for i, f := range spec.IPFamilies {
		if f != corev1.IPv4Protocol && f != corev1.IPv6Protocol {
			errs = append(errs, field.NotSupported(specPath.Child("ipFamilies").Index(i), f, []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}))
		}
		if seen.Has(f) {
			errs = append(errs, field.Duplicate(specPath.Child("ipFamilies").Index(i), f))
		}
		seen.Insert(f)
	}
	if p := spec.IPFamilyPolicy; p != nil && *p != corev1.IPFamilyPolicySingleStack &&
		*p != corev1.IPFamilyPolicyPreferDualStack && *p != corev1.IPFamilyPolicyRequireDualStack {
		errs = append(errs, field.NotSupported(specPath.Child("ipFamilyPolicy"), *p, []corev1.IPFamilyPolicy{
			corev1.IPFamilyPolicyPreferDualStack, corev1.IPFamilyPolicyRequireDualStack, corev1.IPFamilyPolicySingleStack}))
	}
	return append(errs, validateClusterIPValues(svc, ipsPath)...)
}

func validateClusterIPValues(svc *corev1.Service, ipsPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	ips := svc.Spec.ClusterIPs
	for i, ip := range ips {
		if i == 0 && ip == corev1.ClusterIPNone {
			if len(ips) > 1 {
				errs = append(errs, field.Invalid(ipsPath, ips, "'None' must be the first and only value"))
			}
			continue
		}
		errs = append(errs, validation.IsValidIP(ipsPath.Index(i), ip)...)
	}
	if len(ips) > 2 {
		errs = append(errs, field.Invalid(ipsPath, ips, "may only hold up to 2 values"))
	}
	if len(errs) > 0 || isHeadless(svc) {
		return errs
	}
	if len(ips) == 2 && isIPv6(ips[0]) == isIPv6(ips[1]) {
		errs = append(errs, field.Invalid(ipsPath, ips, "may specify no more than one IP for each IP family"))
	}
	for i, ip := range ips {
		if i >= len(svc.Spec.IPFamilies) {
			break
		}
		want := svc.Spec.IPFamilies[i]
		if want == corev1.IPv4Protocol && isIPv6(ip) || want == corev1.IPv6Protocol && !isIPv6(ip) {
			errs = append(errs, field.Invalid(ipsPath.Index(i), ip, fmt.Sprintf("expected an %s value as indicated by `ipFamilies[%v]`", want, i)))
		}
	}
	return errs
}

func isIPv6(ip string) bool {
	parsed := net.ParseIP(ip)
	return parsed != nil && parsed.To4() == nil
}

// validateNonSpecialIP rejects IPs that cannot be a service's external IP or
// an endpoint: unspecified, loopback and link-local addresses.
func validateNonSpecialIP(ip string, path *field.Path) field.ErrorList {
	errs := validation.IsValidIP(path, ip)
	if len(errs) > 0 {
		return errs
	}
	parsed := net.ParseIP(ip)
	switch {
	case parsed.IsUnspecified():
		return field.ErrorList{field.Invalid(path, ip, "may not be unspecified (0.0.0.0)")}
	case parsed.IsLoopback():
		return field.ErrorList{field.Invalid(path, ip, "may not be in the loopback range (127.0.0.0/8, ::1/128)")}
	case parsed.IsLinkLocalUnicast():
		return field.ErrorList{field.Invalid(path, ip, "may not be in the link-local range (169.254.0.0/16, fe80::/10)")}
	case parsed.IsLinkLocalMulticast():
		return field.ErrorList{field.Invalid(path, ip, "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)")}
	}
	return nil
}

func validateTrafficPolicies(svc *corev1.Service, specPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	spec := &svc.Spec
	external := spec.Type == corev1.ServiceTypeLoadBalancer || spec.Type == corev1.ServiceTypeNodePort ||
		spec.Type == corev1.ServiceTypeClusterIP && len(spec.ExternalIPs) > 0
	switch {
	case !external && spec.ExternalTrafficPolicy != "":
		errs = append(errs, field.Invalid(specPath.Child("externalTrafficPolicy"), spec.ExternalTrafficPolicy,
			"may only be set for externally-accessible services"))
	case external && spec.ExternalTrafficPolicy == "":
		errs = append(errs, field.Required(specPath.Child("externalTrafficPolicy"), ""))
	case external && spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyCluster &&
		spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal:
		errs = append(errs, field.NotSupported(specPath.Child("externalTrafficPolicy"), spec.ExternalTrafficPolicy,
			[]corev1.ServiceExternalTrafficPolicy{corev1.ServiceExternalTrafficPolicyCluster, corev1.ServiceExternalTrafficPolicyLocal}))
	}
	if p := spec.InternalTrafficPolicy; p != nil && *p != corev1.ServiceInternalTrafficPolicyCluster && *p != corev1.ServiceInternalTrafficPolicyLocal {
		errs = append(errs, field.NotSupported(specPath.Child("internalTrafficPolicy"), *p,
			[]corev1.ServiceInternalTrafficPolicy{corev1.ServiceInternalTrafficPolicyCluster, corev1.ServiceInternalTrafficPolicyLocal}))
	}
	return errs
}

// validateServiceUpdate adds upstream's immutability rule: allocated cluster
// IPs may not change (a secondary one may be added or, with SingleStack,
// released), except when the service becomes or stops being ExternalName.
func validateServiceUpdate(svc, old *corev1.Service) field.ErrorList {
	errs := validateMetaUpdate(svc, old)
	if svc.Spec.Type != corev1.ServiceTypeExternalName && old.Spec.Type != corev1.ServiceTypeExternalName &&
		!(isHeadless(svc) && isHeadless(old)) {
		errs = append(errs, validateClusterIPsUpdate(svc, old)...)
	}
	return append(errs, validateServiceSpec(svc)...)
}

func validateClusterIPsUpdate(svc, old *corev1.Service) field.ErrorList {
	ips, oldIPs := svc.Spec.ClusterIPs, old.Spec.ClusterIPs
	first := field.NewPath("spec", "clusterIPs").Index(0)
	switch {
	case len(oldIPs) == len(ips):
		var errs field.ErrorList
		for i := range oldIPs {
			if oldIPs[i] != ips[i] {
				errs = append(errs, field.Invalid(field.NewPath("spec", "clusterIPs").Index(i), ips, "may not change once set"))
			}
		}
		return errs
	case len(ips) == 0:
		return field.ErrorList{field.Invalid(first, ips, "primary clusterIP can not be unset")}
	case len(oldIPs) > 0 && ips[0] != oldIPs[0]:
		return field.ErrorList{field.Invalid(first, ips, "may not change once set")}
	case len(oldIPs) > len(ips) && (svc.Spec.IPFamilyPolicy == nil || *svc.Spec.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack):
		return field.ErrorList{field.Invalid(first, ips, "`ipFamilyPolicy` must be set to 'SingleStack' when releasing the secondary clusterIP")}
	}
	return nil
}

func validateServiceStatusUpdate(svc, old *corev1.Service) field.ErrorList {
	errs := validateMetaUpdate(svc, old)
	path := field.NewPath("status", "loadBalancer", "ingress")
	for i, ing := range svc.Status.LoadBalancer.Ingress {
		p := path.Index(i)
		if ing.IP != "" {
			errs = append(errs, validation.IsValidIP(p.Child("ip"), ing.IP)...)
		}
		if ing.IPMode != nil && ing.IP == "" {
			errs = append(errs, field.Required(p.Child("ip"), "must be specified when `ipMode` is set"))
		}
		if ing.Hostname != "" {
			errs = append(errs, dns1123Subdomain(ing.Hostname, p.Child("hostname"))...)
			if net.ParseIP(ing.Hostname) != nil {
				errs = append(errs, field.Invalid(p.Child("hostname"), ing.Hostname, "must be a DNS name, not an IP address"))
			}
		}
	}
	return errs
}
