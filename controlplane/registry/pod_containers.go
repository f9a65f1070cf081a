package registry

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const notForInitContainers = "may not be set for init containers without restartPolicy=Always"

// validateContainers validates app and init containers. Names must be unique
// across both lists (a clash is reported on the init container); host ports
// must not clash among app containers, while init containers, which run one
// at a time, are only checked against themselves.
func validateContainers(spec *corev1.PodSpec, vols map[string]corev1.VolumeSource, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	ctrPath := path.Child("containers")
	if len(spec.Containers) == 0 {
		errs = append(errs, field.Required(ctrPath, ""))
	}
	for i := range spec.Containers {
		c, p := &spec.Containers[i], ctrPath.Index(i)
		errs = append(errs, validateContainer(c, vols, p)...)
		if names.Has(c.Name) {
			errs = append(errs, field.Duplicate(p.Child("name"), c.Name))
		} else {
			names.Insert(c.Name)
		}
		errs = append(errs, validateContainerProbes(c, p)...)
		if c.RestartPolicy != nil {
			errs = append(errs, field.Forbidden(p.Child("restartPolicy"), "may not be set for non-init containers"))
		}
	}
	errs = append(errs, validateHostPorts(spec.Containers, ctrPath, 0)...)
	initPath := path.Child("initContainers")
	for i := range spec.InitContainers {
		c, p := &spec.InitContainers[i], initPath.Index(i)
		errs = append(errs, validateContainer(c, vols, p)...)
		if names.Has(c.Name) {
			errs = append(errs, field.Duplicate(p.Child("name"), c.Name))
		} else if c.Name != "" {
			names.Insert(c.Name)
		}
		errs = append(errs, validateHostPorts(spec.InitContainers[i:i+1], initPath, i)...)
		errs = append(errs, validateInitContainerExtras(c, p)...)
	}
	return errs
}

// validateInitContainerExtras: only restartable ("sidecar") init containers
// may have probes and lifecycle hooks.
func validateInitContainerExtras(c *corev1.Container, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.RestartPolicy != nil && *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		errs = append(errs, field.NotSupported(p.Child("restartPolicy"), *c.RestartPolicy,
			[]corev1.ContainerRestartPolicy{corev1.ContainerRestartPolicyAlways}))
	}
	if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
		return append(errs, validateContainerProbes(c, p)...)
	}
	if c.Lifecycle != nil {
		errs = append(errs, field.Forbidden(p.Child("lifecycle"), notForInitContainers))
	}
	if c.LivenessProbe != nil {
		errs = append(errs, field.Forbidden(p.Child("livenessProbe"), notForInitContainers))
	}
	if c.ReadinessProbe != nil {
		errs = append(errs, field.Forbidden(p.Child("readinessProbe"), notForInitContainers))
	}
	if c.StartupProbe != nil {
		errs = append(errs, field.Forbidden(p.Child("startupProbe"), notForInitContainers))
	}
	return errs
}

// validateContainer holds the checks common to every kind of container.
func validateContainer(c *corev1.Container, vols map[string]corev1.VolumeSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else {
		errs = append(errs, dns1123Label(c.Name, p.Child("name"))...)
	}
	if c.Image == "" {
		errs = append(errs, field.Required(p.Child("image"), ""))
	}
	switch c.TerminationMessagePolicy {
	case corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError:
	case "":
		errs = append(errs, field.Required(p.Child("terminationMessagePolicy"), ""))
	default:
		errs = append(errs, field.NotSupported(p.Child("terminationMessagePolicy"), c.TerminationMessagePolicy,
			[]corev1.TerminationMessagePolicy{corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError}))
	}
	switch c.ImagePullPolicy {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	case "":
		errs = append(errs, field.Required(p.Child("imagePullPolicy"), ""))
	default:
		errs = append(errs, field.NotSupported(p.Child("imagePullPolicy"), c.ImagePullPolicy,
			[]corev1.PullPolicy{corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever}))
	}
	errs = append(errs, validateContainerPorts(c.Ports, p.Child("ports"))...)
	errs = append(errs, validateEnv(c.Env, p.Child("env"))...)
	errs = append(errs, validateEnvFrom(c.EnvFrom, p.Child("envFrom"))...)
	errs = append(errs, validateVolumeMounts(c.VolumeMounts, vols, p.Child("volumeMounts"))...)
	errs = append(errs, validateResources(&c.Resources, p.Child("resources"))...)
	return errs
}

func validateContainerPorts(ports []corev1.ContainerPort, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, port := range ports {
		p := path.Index(i)
		if port.Name != "" {
			if msgs := validation.IsValidPortName(port.Name); len(msgs) != 0 {
				for _, msg := range msgs {
					errs = append(errs, field.Invalid(p.Child("name"), port.Name, msg))
				}
			} else if names.Has(port.Name) {
				errs = append(errs, field.Duplicate(p.Child("name"), port.Name))
			} else {
				names.Insert(port.Name)
			}
		}
		if port.ContainerPort == 0 {
			errs = append(errs, field.Required(p.Child("containerPort"), ""))
		} else {
			for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
				errs = append(errs, field.Invalid(p.Child("containerPort"), port.ContainerPort, msg))
			}
		}
		if port.HostPort != 0 {
			for _, msg := range validation.IsValidPortNum(int(port.HostPort)) {
				errs = append(errs, field.Invalid(p.Child("hostPort"), port.HostPort, msg))
			}
		}
		errs = append(errs, validateProtocol(port.Protocol, p.Child("protocol"))...)
	}
	return errs
}

func validateProtocol(proto corev1.Protocol, path *field.Path) field.ErrorList {
	switch proto {
	case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
		return nil
	case "":
		return field.ErrorList{field.Required(path, "")}
	}
	return field.ErrorList{field.NotSupported(path, proto, []corev1.Protocol{corev1.ProtocolSCTP, corev1.ProtocolTCP, corev1.ProtocolUDP})}
}

// validateHostPorts rejects two ports claiming the same protocol, host IP and
// host port. first is the index of containers[0] within the list at path.
func validateHostPorts(containers []corev1.Container, path *field.Path, first int) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for ci, c := range containers {
		for pi, port := range c.Ports {
			if port.HostPort == 0 {
				continue
			}
			key := fmt.Sprintf("%s/%s/%d", port.Protocol, port.HostIP, port.HostPort)
			if seen.Has(key) {
				errs = append(errs, field.Duplicate(path.Index(first+ci).Child("ports").Index(pi).Child("hostPort"), key))
			}
			seen.Insert(key)
		}
	}
	return errs
}

// validateEnv checks variable names with the relaxed rule upstream applies by
// default since 1.32 (any printable ASCII except '='), and valueFrom.
func validateEnv(vars []corev1.EnvVar, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, ev := range vars {
		p := path.Index(i)
		if ev.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		} else {
			for _, msg := range validation.IsRelaxedEnvVarName(ev.Name) {
				errs = append(errs, field.Invalid(p.Child("name"), ev.Name, msg))
			}
		}
		if ev.ValueFrom != nil {
			errs = append(errs, validateEnvVarSource(ev.ValueFrom, ev.Value != "", p.Child("valueFrom"))...)
		}
	}
	return errs
}

func validateEnvVarSource(src *corev1.EnvVarSource, hasValue bool, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	n := 0
	if ref := src.FieldRef; ref != nil {
		n++
		errs = append(errs, validateFieldRef(ref, path.Child("fieldRef"))...)
	}
	if src.ResourceFieldRef != nil {
		n++
		if src.ResourceFieldRef.Resource == "" {
			errs = append(errs, field.Required(path.Child("resourceFieldRef", "resource"), ""))
		}
	}
	if ref := src.ConfigMapKeyRef; ref != nil {
		n++
		errs = append(errs, validateKeyRef(ref.Name, ref.Key, path.Child("configMapKeyRef"))...)
	}
	if ref := src.SecretKeyRef; ref != nil {
		n++
		errs = append(errs, validateKeyRef(ref.Name, ref.Key, path.Child("secretKeyRef"))...)
	}
	switch {
	case n == 0:
		errs = append(errs, field.Invalid(path, "", "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"))
	case n > 1:
		errs = append(errs, field.Invalid(path, "", "may not have more than one field specified at a time"))
	case hasValue:
		errs = append(errs, field.Invalid(path, "", "may not be specified when `value` is not empty"))
	}
	return errs
}

func validateKeyRef(name, key string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		errs = append(errs, field.Required(path.Child("name"), ""))
	}
	if key == "" {
		errs = append(errs, field.Required(path.Child("key"), ""))
	} else {
		for _, msg := range validation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(path.Child("key"), key, msg))
		}
	}
	return errs
}

// validateFieldRef allows the pod fields the downward API exposes to
// environment variables.
func validateFieldRef(ref *corev1.ObjectFieldSelector, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if ref.APIVersion == "" {
		errs = append(errs, field.Required(path.Child("apiVersion"), ""))
	}
	if ref.FieldPath == "" {
		return append(errs, field.Required(path.Child("fieldPath"), ""))
	}
	supported := []string{"metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName",
		"spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs"}
	for _, s := range supported {
		if ref.FieldPath == s {
			return errs
		}
	}
	for _, prefix := range []string{"metadata.labels['", "metadata.annotations['"} {
		if strings.HasPrefix(ref.FieldPath, prefix) && strings.HasSuffix(ref.FieldPath, "']") {
			return errs
		}
	}
	return append(errs, field.NotSupported(path.Child("fieldPath"), ref.FieldPath, supported))
}

func validateEnvFrom(sources []corev1.EnvFromSource, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, s := range sources {
		p := path.Index(i)
		if s.Prefix != "" {
			for _, msg := range validation.IsRelaxedEnvVarName(s.Prefix) {
				errs = append(errs, field.Invalid(p.Child("prefix"), s.Prefix, msg))
			}
		}
		n := 0
		if s.ConfigMapRef != nil {
			n++
			errs = append(errs, validateEnvFromName(s.ConfigMapRef.Name, p.Child("configMapRef", "name"))...)
		}
		if s.SecretRef != nil {
			n++
			errs = append(errs, validateEnvFromName(s.SecretRef.Name, p.Child("secretRef", "name"))...)
		}
		if n == 0 {
			errs = append(errs, field.Invalid(path, "", "must specify one of: `configMapRef` or `secretRef`"))
		} else if n > 1 {
			errs = append(errs, field.Invalid(path, "", "may not have more than one field specified at a time"))
		}
	}
	return errs
}

func validateEnvFromName(name string, path *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	return dns1123Subdomain(name, path)
}

// validateVolumeMounts: each mount names a valid volume of the pod and has a
// mount path unique within the container. Upstream does not require the path
// to be absolute (Windows paths are not).
func validateVolumeMounts(mounts []corev1.VolumeMount, vols map[string]corev1.VolumeSource, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	paths := sets.New[string]()
	for i, m := range mounts {
		p := path.Index(i)
		if m.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		}
		if _, ok := vols[m.Name]; !ok {
			errs = append(errs, field.NotFound(p.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			errs = append(errs, field.Required(p.Child("mountPath"), ""))
		}
		if paths.Has(m.MountPath) {
			errs = append(errs, field.Invalid(p.Child("mountPath"), m.MountPath, "must be unique"))
		}
		paths.Insert(m.MountPath)
		if m.SubPath != "" {
			errs = append(errs, validateLocalDescendingPath(m.SubPath, p.Child("subPath"))...)
		}
		if m.MountPropagation != nil {
			switch *m.MountPropagation {
			case corev1.MountPropagationNone, corev1.MountPropagationHostToContainer, corev1.MountPropagationBidirectional:
			default:
				errs = append(errs, field.NotSupported(p.Child("mountPropagation"), *m.MountPropagation, []corev1.MountPropagationMode{
					corev1.MountPropagationBidirectional, corev1.MountPropagationHostToContainer, corev1.MountPropagationNone}))
			}
		}
	}
	return errs
}

// validateResources checks resource names and quantities, and that a request
// does not exceed its limit (for resources that cannot be overcommitted, such
// as hugepages and extended resources, the two must be equal).
func validateResources(r *corev1.ResourceRequirements, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	limPath, reqPath := path.Child("limits"), path.Child("requests")
	for name, q := range r.Limits {
		errs = append(errs, validateResourceQuantity(name, q, limPath.Key(string(name)))...)
	}
	for name, q := range r.Requests {
		errs = append(errs, validateResourceQuantity(name, q, reqPath.Key(string(name)))...)
		lim, ok := r.Limits[name]
		overcommit := isOvercommitAllowed(name)
		switch {
		case ok && !overcommit && q.Cmp(lim) != 0:
			errs = append(errs, field.Invalid(reqPath, q.String(), fmt.Sprintf("must be equal to %s limit of %s", name, lim.String())))
		case ok && q.Cmp(lim) > 0:
			errs = append(errs, field.Invalid(reqPath, q.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, lim.String())))
		case !ok && !overcommit:
			errs = append(errs, field.Required(limPath, "Limit must be set for non overcommitable resources"))
		}
	}
	return errs
}

func validateResourceQuantity(name corev1.ResourceName, q resource.Quantity, path *field.Path) field.ErrorList {
	errs := qualifiedName(string(name), path)
	if !strings.Contains(string(name), "/") {
		switch {
		case name == corev1.ResourceCPU, name == corev1.ResourceMemory, name == corev1.ResourceEphemeralStorage,
			strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix):
		default:
			errs = append(errs, field.Invalid(path, name, "must be a standard resource for containers"))
		}
	}
	if q.Sign() < 0 {
		errs = append(errs, field.Invalid(path, q.String(), "must be greater than or equal to 0"))
	}
	if isExtendedResource(name) && q.MilliValue()%1000 != 0 {
		errs = append(errs, field.Invalid(path, q, "must be an integer"))
	}
	return errs
}

// isExtendedResource reports whether name is a vendor resource
// (domain-qualified, outside kubernetes.io).
func isExtendedResource(name corev1.ResourceName) bool {
	s := string(name)
	return strings.Contains(s, "/") && !strings.Contains(s, corev1.ResourceDefaultNamespacePrefix) &&
		!strings.HasPrefix(s, corev1.DefaultResourceRequestsPrefix)
}

func isOvercommitAllowed(name corev1.ResourceName) bool {
	native := !strings.Contains(string(name), "/") || strings.Contains(string(name), corev1.ResourceDefaultNamespacePrefix)
	return native && !strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

func validateContainerProbes(c *corev1.Container, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.Lifecycle != nil {
		errs = append(errs, validateLifecycleHandler(c.Lifecycle.PostStart, p.Child("lifecycle", "postStart"))...)
		errs = append(errs, validateLifecycleHandler(c.Lifecycle.PreStop, p.Child("lifecycle", "preStop"))...)
	}
	for _, probe := range []struct {
		probe *corev1.Probe
		name  string
	}{{c.LivenessProbe, "livenessProbe"}, {c.ReadinessProbe, "readinessProbe"}, {c.StartupProbe, "startupProbe"}} {
		if probe.probe == nil {
			continue
		}
		pp := p.Child(probe.name)
		errs = append(errs, validateProbe(probe.probe, pp)...)
		if probe.name == "readinessProbe" && probe.probe.TerminationGracePeriodSeconds != nil {
			errs = append(errs, field.Invalid(pp.Child("terminationGracePeriodSeconds"), *probe.probe.TerminationGracePeriodSeconds, "must not be set for readinessProbes"))
		}
		if probe.name != "readinessProbe" && probe.probe.SuccessThreshold != 1 {
			errs = append(errs, field.Invalid(pp.Child("successThreshold"), probe.probe.SuccessThreshold, "must be 1"))
		}
	}
	return errs
}

func validateProbe(probe *corev1.Probe, path *field.Path) field.ErrorList {
	h := probe.ProbeHandler
	errs := validateHandler(h.Exec, h.HTTPGet, h.TCPSocket, h.GRPC != nil, path)
	errs = append(errs, nonNegative(int64(probe.InitialDelaySeconds), path.Child("initialDelaySeconds"))...)
	errs = append(errs, nonNegative(int64(probe.TimeoutSeconds), path.Child("timeoutSeconds"))...)
	errs = append(errs, nonNegative(int64(probe.PeriodSeconds), path.Child("periodSeconds"))...)
	errs = append(errs, nonNegative(int64(probe.SuccessThreshold), path.Child("successThreshold"))...)
	errs = append(errs, nonNegative(int64(probe.FailureThreshold), path.Child("failureThreshold"))...)
	if g := probe.TerminationGracePeriodSeconds; g != nil && *g <= 0 {
		errs = append(errs, field.Invalid(path.Child("terminationGracePeriodSeconds"), *g, "must be greater than 0"))
	}
	if probe.GRPC != nil {
		for _, msg := range validation.IsValidPortNum(int(probe.GRPC.Port)) {
			errs = append(errs, field.Invalid(path.Child("grpc", "port"), probe.GRPC.Port, msg))
		}
	}
	return errs
}

func validateLifecycleHandler(h *corev1.LifecycleHandler, path *field.Path) field.ErrorList {
	if h == nil {
		return nil
	}
	return validateHandler(h.Exec, h.HTTPGet, h.TCPSocket, h.Sleep != nil, path)
}

// validateHandler requires exactly one action; other is an action kind
// without further checks here (grpc, sleep).
func validateHandler(exec *corev1.ExecAction, get *corev1.HTTPGetAction, tcp *corev1.TCPSocketAction, other bool, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	n := 0
	if other {
		n++
	}
	if exec != nil {
		n++
		if len(exec.Command) == 0 {
			errs = append(errs, field.Required(path.Child("exec", "command"), ""))
		}
	}
	if get != nil {
		if n > 0 {
			errs = append(errs, field.Forbidden(path.Child("httpGet"), "may not specify more than 1 handler type"))
		}
		n++
		errs = append(errs, validateHTTPGet(get, path.Child("httpGet"))...)
	}
	if tcp != nil {
		if n > 0 {
			errs = append(errs, field.Forbidden(path.Child("tcpSocket"), "may not specify more than 1 handler type"))
		}
		n++
		errs = append(errs, validatePortNumOrName(tcp.Port, path.Child("tcpSocket", "port"))...)
	}
	if n == 0 {
		errs = append(errs, field.Required(path, "must specify a handler type"))
	}
	return errs
}

func validateHTTPGet(get *corev1.HTTPGetAction, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if get.Path == "" {
		errs = append(errs, field.Required(path.Child("path"), ""))
	}
	errs = append(errs, validatePortNumOrName(get.Port, path.Child("port"))...)
	if get.Scheme != corev1.URISchemeHTTP && get.Scheme != corev1.URISchemeHTTPS {
		errs = append(errs, field.NotSupported(path.Child("scheme"), get.Scheme, []corev1.URIScheme{corev1.URISchemeHTTP, corev1.URISchemeHTTPS}))
	}
	for i, h := range get.HTTPHeaders {
		for _, msg := range validation.IsHTTPHeaderName(h.Name) {
			errs = append(errs, field.Invalid(path.Child("httpHeaders").Index(i).Child("name"), h.Name, msg))
		}
	}
	return errs
}

func validatePortNumOrName(port intstr.IntOrString, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if port.Type == intstr.Int {
		for _, msg := range validation.IsValidPortNum(port.IntValue()) {
			errs = append(errs, field.Invalid(path, port.IntValue(), msg))
		}
		return errs
	}
	for _, msg := range validation.IsValidPortName(port.StrVal) {
		errs = append(errs, field.Invalid(path, port.StrVal, msg))
	}
	return errs
}
