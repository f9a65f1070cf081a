package registry

import (
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// Priorities of the built-in priority classes (upstream's
// scheduling.SystemCriticalPriority and friends).
const (
	systemClusterCriticalPriority = int32(2000000000)
	systemNodeCriticalPriority    = int32(2000001000)
)

// defaultPod gives a Pod what upstream gives it on its way into storage: the
// v1 defaulting functions (SetDefaults_Pod, SetDefaults_PodSpec and the
// container, probe and volume defaults), the v1 conversion's aliases, and the
// mutations of the admission plugins every cluster runs (ServiceAccount,
// Priority, DefaultTolerationSeconds). It is idempotent.
func defaultPod(pod *corev1.Pod, opts Options) {
	spec := &pod.Spec
	defaultRequestsFromLimits(spec.Containers)
	defaultRequestsFromLimits(spec.InitContainers)
	if spec.EnableServiceLinks == nil {
		spec.EnableServiceLinks = ptr.To(corev1.DefaultEnableServiceLinks)
	}
	if spec.HostNetwork {
		defaultHostNetworkPorts(spec.Containers)
		defaultHostNetworkPorts(spec.InitContainers)
	}
	defaultPodSpec(spec)
	admitPod(spec, opts)
	syncPodStatusIPs(&pod.Status)
}

// defaultPodSpec applies the defaults every PodSpec gets, in pods and in the
// templates of workload resources alike.
func defaultPodSpec(spec *corev1.PodSpec) {
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = corev1.DNSClusterFirst
	}
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	if spec.TerminationGracePeriodSeconds == nil {
		spec.TerminationGracePeriodSeconds = ptr.To(int64(corev1.DefaultTerminationGracePeriodSeconds))
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = corev1.DefaultSchedulerName
	}
	// serviceAccount is the deprecated alias of serviceAccountName; the v1
	// conversion prefers the new field and writes the old one back.
	if spec.ServiceAccountName == "" {
		spec.ServiceAccountName = spec.DeprecatedServiceAccount
	}
	spec.DeprecatedServiceAccount = spec.ServiceAccountName
	for i := range spec.Volumes {
		defaultVolume(&spec.Volumes[i])
	}
	for i := range spec.InitContainers {
		defaultContainer(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		defaultContainer(&spec.Containers[i])
	}
	for i := range spec.EphemeralContainers {
		defaultContainer((*corev1.Container)(&spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
	roundUpResources(spec.Overhead)
}

// admitPod applies the create-time mutations of upstream's admission plugins
// that do not need other objects: the service account defaults to "default"
// (ServiceAccount), the priority comes from the priority class (Priority; only
// the built-in classes are known here, anything else gets 0), and NoExecute
// tolerations for not-ready and unreachable nodes are added unless the pod
// already tolerates those taints (DefaultTolerationSeconds).
func admitPod(spec *corev1.PodSpec, opts Options) {
	if spec.ServiceAccountName == "" {
		spec.ServiceAccountName = "default"
		spec.DeprecatedServiceAccount = "default"
	}
	if spec.Priority == nil {
		var p int32
		switch spec.PriorityClassName {
		case "system-node-critical":
			p = systemNodeCriticalPriority
		case "system-cluster-critical":
			p = systemClusterCriticalPriority
		}
		spec.Priority = &p
	}
	if spec.PreemptionPolicy == nil {
		spec.PreemptionPolicy = ptr.To(corev1.PreemptLowerPriority)
	}
	addDefaultTolerations(spec, opts)
}

func addDefaultTolerations(spec *corev1.PodSpec, opts Options) {
	notReady, unreachable := false, false
	for _, t := range spec.Tolerations {
		if t.Effect != corev1.TaintEffectNoExecute && t.Effect != "" {
			continue
		}
		if t.Key == "" || t.Key == corev1.TaintNodeNotReady {
			notReady = true
		}
		if t.Key == "" || t.Key == corev1.TaintNodeUnreachable {
			unreachable = true
		}
	}
	if !notReady {
		spec.Tolerations = append(spec.Tolerations, corev1.Toleration{
			Key:               corev1.TaintNodeNotReady,
			Operator:          corev1.TolerationOpExists,
			Effect:            corev1.TaintEffectNoExecute,
			TolerationSeconds: ptr.To(opts.DefaultNotReadyTolerationSeconds),
		})
	}
	if !unreachable {
		spec.Tolerations = append(spec.Tolerations, corev1.Toleration{
			Key:               corev1.TaintNodeUnreachable,
			Operator:          corev1.TolerationOpExists,
			Effect:            corev1.TaintEffectNoExecute,
			TolerationSeconds: ptr.To(opts.DefaultUnreachableTolerationSeconds),
		})
	}
}

// defaultRequestsFromLimits copies each limit to the matching request when the
// request is missing. Upstream does this for pods only, not for templates.
func defaultRequestsFromLimits(containers []corev1.Container) {
	for i := range containers {
		res := &containers[i].Resources
		if res.Limits == nil {
			continue
		}
		if res.Requests == nil {
			res.Requests = corev1.ResourceList{}
		}
		for name, q := range res.Limits {
			if _, ok := res.Requests[name]; !ok {
				res.Requests[name] = q.DeepCopy()
			}
		}
	}
}

// defaultHostNetworkPorts makes every container port a host port, as a pod on
// the host network really uses it.
func defaultHostNetworkPorts(containers []corev1.Container) {
	for i := range containers {
		for j := range containers[i].Ports {
			if containers[i].Ports[j].HostPort == 0 {
				containers[i].Ports[j].HostPort = containers[i].Ports[j].ContainerPort
			}
		}
	}
}

func defaultContainer(c *corev1.Container) {
	if c.ImagePullPolicy == "" {
		if imageTag(c.Image) == "latest" {
			c.ImagePullPolicy = corev1.PullAlways
		} else {
			c.ImagePullPolicy = corev1.PullIfNotPresent
		}
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = corev1.ProtocolTCP
		}
	}
	for i := range c.Env {
		if vf := c.Env[i].ValueFrom; vf != nil && vf.FieldRef != nil && vf.FieldRef.APIVersion == "" {
			vf.FieldRef.APIVersion = "v1"
		}
	}
	roundUpResources(c.Resources.Limits)
	roundUpResources(c.Resources.Requests)
	defaultProbe(c.LivenessProbe)
	defaultProbe(c.ReadinessProbe)
	defaultProbe(c.StartupProbe)
	if c.Lifecycle != nil {
		defaultLifecycleHandler(c.Lifecycle.PostStart)
		defaultLifecycleHandler(c.Lifecycle.PreStop)
	}
}

// imageTag returns the tag an image reference names: "latest" when it names
// neither a tag nor a digest, "" when it names only a digest or cannot be
// parsed (upstream's parsers.ParseImageName, which pull-policy defaulting
// relies on; repository paths must be lower case).
func imageTag(image string) string {
	ref, digest, _ := strings.Cut(image, "@")
	tag := ""
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref, tag = ref[:i], ref[i+1:]
	}
	// The first component is a registry host when it looks like one (a dot,
	// a port, "localhost", or upper case, which paths may not contain).
	if host, rest, ok := strings.Cut(ref, "/"); ok &&
		(strings.ContainsAny(host, ".:") || host == "localhost" || strings.ToLower(host) != host) {
		ref = rest
	}
	if ref == "" || strings.ToLower(ref) != ref {
		return ""
	}
	if tag == "" && digest == "" {
		return "latest"
	}
	return tag
}

// roundUpResources rounds quantities up to milli precision, as upstream's
// SetDefaults_ResourceList does for compatibility.
func roundUpResources(list corev1.ResourceList) {
	for name, q := range list {
		q.RoundUp(resource.Milli)
		list[name] = q
	}
}

func defaultProbe(p *corev1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	defaultHTTPGet(p.HTTPGet)
	if p.GRPC != nil && p.GRPC.Service == nil {
		p.GRPC.Service = ptr.To("")
	}
}

func defaultLifecycleHandler(h *corev1.LifecycleHandler) {
	if h != nil {
		defaultHTTPGet(h.HTTPGet)
	}
}

func defaultHTTPGet(a *corev1.HTTPGetAction) {
	if a == nil {
		return
	}
	if a.Path == "" {
		a.Path = "/"
	}
	if a.Scheme == "" {
		a.Scheme = corev1.URISchemeHTTP
	}
}

// defaultVolume turns a volume without a source into an emptyDir and fills in
// the per-source defaults (file modes, hostPath type, token lifetimes...).
func defaultVolume(v *corev1.Volume) {
	src := &v.VolumeSource
	if countVolumeSources(src) == 0 {
		src.EmptyDir = &corev1.EmptyDirVolumeSource{}
	}
	if src.HostPath != nil && src.HostPath.Type == nil {
		src.HostPath.Type = ptr.To(corev1.HostPathUnset)
	}
	if src.Secret != nil && src.Secret.DefaultMode == nil {
		src.Secret.DefaultMode = ptr.To(corev1.SecretVolumeSourceDefaultMode)
	}
	if src.ConfigMap != nil && src.ConfigMap.DefaultMode == nil {
		src.ConfigMap.DefaultMode = ptr.To(corev1.ConfigMapVolumeSourceDefaultMode)
	}
	if src.DownwardAPI != nil {
		if src.DownwardAPI.DefaultMode == nil {
			src.DownwardAPI.DefaultMode = ptr.To(corev1.DownwardAPIVolumeSourceDefaultMode)
		}
		defaultDownwardAPIItems(src.DownwardAPI.Items)
	}
	if src.Projected != nil {
		defaultProjected(src.Projected)
	}
	if src.ISCSI != nil && src.ISCSI.ISCSIInterface == "" {
		src.ISCSI.ISCSIInterface = "default"
	}
	if src.Ephemeral != nil && src.Ephemeral.VolumeClaimTemplate != nil &&
		src.Ephemeral.VolumeClaimTemplate.Spec.VolumeMode == nil {
		src.Ephemeral.VolumeClaimTemplate.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeFilesystem)
	}
}

func defaultProjected(p *corev1.ProjectedVolumeSource) {
	if p.DefaultMode == nil {
		p.DefaultMode = ptr.To(corev1.ProjectedVolumeSourceDefaultMode)
	}
	for i := range p.Sources {
		s := &p.Sources[i]
		if s.DownwardAPI != nil {
			defaultDownwardAPIItems(s.DownwardAPI.Items)
		}
		if s.ServiceAccountToken != nil && s.ServiceAccountToken.ExpirationSeconds == nil {
			s.ServiceAccountToken.ExpirationSeconds = ptr.To(int64(3600))
		}
	}
}

func defaultDownwardAPIItems(items []corev1.DownwardAPIVolumeFile) {
	for i := range items {
		if ref := items[i].FieldRef; ref != nil && ref.APIVersion == "" {
			ref.APIVersion = "v1"
		}
	}
}

// syncPodStatusIPs keeps the singular and plural IP fields in step, as the v1
// conversion does: the plural wins, the singular is its first element.
func syncPodStatusIPs(s *corev1.PodStatus) {
	if len(s.PodIPs) == 0 && s.PodIP != "" {
		s.PodIPs = []corev1.PodIP{{IP: s.PodIP}}
	}
	if len(s.PodIPs) > 0 {
		s.PodIP = s.PodIPs[0].IP
	}
	if len(s.HostIPs) == 0 && s.HostIP != "" {
		s.HostIPs = []corev1.HostIP{{IP: s.HostIP}}
	}
	if len(s.HostIPs) > 0 {
		s.HostIP = s.HostIPs[0].IP
	}
}

// countVolumeSources counts the sources set in src (every source is a
// pointer field of VolumeSource).
func countVolumeSources(src *corev1.VolumeSource) int {
	n := 0
	v := reflect.ValueOf(src).Elem()
	for i := 0; i < v.NumField(); i++ {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			n++
		}
	}
	return n
}
