package kubeletconfig

import (
	"maps"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Setting is one field of the file as the value of the flag that carries
// the same setting.
type Setting struct {
	Field string // the file's field, e.g. "maxPods" or "authentication.x509.clientCAFile"
	Flag  string // the upstream flag name, e.g. "max-pods"
	Value string // in the flag's syntax
}

// mapped are the top-level fields Settings maps ("authentication" but
// for x509's fields other than clientCAFile).
var mapped = map[string]bool{
	"maxPods": true, "podPidsLimit": true, "oomScoreAdj": true, "seccompDefault": true, "cgroupDriver": true, "cgroupRoot": true, "clusterDNS": true, "clusterDomain": true,
	"systemReserved": true, "kubeReserved": true, "podCIDR": true, "serializeImagePulls": true,
	"maxParallelImagePulls": true, "address": true, "port": true, "tlsCertFile": true,
	"tlsPrivateKeyFile": true, "healthzPort": true, "healthzBindAddress": true,
	"containerRuntimeEndpoint": true, "registerWithTaints": true, "resolvConf": true,
	"kubeAPIQPS": true, "kubeAPIBurst": true, "authentication": true, "authorization": true,
	"imageGCHighThresholdPercent": true, "imageGCLowThresholdPercent": true, "imageMinimumGCAge": true,
	"evictionHard": true, "evictionSoft": true, "evictionSoftGracePeriod": true, "evictionMinimumReclaim": true,
	"evictionPressureTransitionPeriod": true, "evictionMaxPodGracePeriod": true, "mergeDefaultEvictionSettings": true,
	"containerLogMaxSize": true, "containerLogMaxFiles": true, "allowedUnsafeSysctls": true, "volumeStatsAggPeriod": true,
	"rotateCertificates": true, "serverTLSBootstrap": true,
}

// defaultEvictionHard is upstream's DefaultEvictionHard (Linux) with
// pid.available, as eviction.DefaultHard, which
// mergeDefaultEvictionSettings merges under the file's evictionHard.
var defaultEvictionHard = map[string]string{
	"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%", "imagefs.available": "15%",
	"pid.available": "10%",
}

func isMapped(field string) bool { return mapped[field] }

// Settings are the fields the file sets, as flag values. A field left out
// of the file (zero, or nil for upstream's pointer fields) gives none, so
// the flag keeps its default.
func (f *File) Settings() []Setting {
	c := &f.Config
	var out []Setting
	add := func(field, flag, value string, set bool) {
		if set {
			out = append(out, Setting{Field: field, Flag: flag, Value: value})
		}
	}
	add("maxPods", "max-pods", itoa(c.MaxPods), c.MaxPods != 0)
	if c.PodPidsLimit != nil {
		add("podPidsLimit", "pod-max-pids", strconv.FormatInt(*c.PodPidsLimit, 10), true)
	}
	if c.SeccompDefault != nil {
		add("seccompDefault", "seccomp-default", strconv.FormatBool(*c.SeccompDefault), true)
	}
	if c.OOMScoreAdj != nil {
		add("oomScoreAdj", "oom-score-adj", itoa(*c.OOMScoreAdj), true)
	}
	add("cgroupDriver", "cgroup-driver", c.CgroupDriver, c.CgroupDriver != "")
	add("cgroupRoot", "cgroup-root", c.CgroupRoot, c.CgroupRoot != "")
	add("clusterDNS", "cluster-dns", strings.Join(c.ClusterDNS, ","), len(c.ClusterDNS) > 0)
	add("clusterDomain", "cluster-domain", c.ClusterDomain, c.ClusterDomain != "")
	add("systemReserved", "system-reserved", joinMap(c.SystemReserved), len(c.SystemReserved) > 0)
	add("kubeReserved", "kube-reserved", joinMap(c.KubeReserved), len(c.KubeReserved) > 0)
	add("podCIDR", "pod-cidr", c.PodCIDR, c.PodCIDR != "")
	if c.SerializeImagePulls != nil {
		add("serializeImagePulls", "serialize-image-pulls", strconv.FormatBool(*c.SerializeImagePulls), true)
	}
	if c.MaxParallelImagePulls != nil {
		add("maxParallelImagePulls", "max-parallel-image-pulls", itoa(*c.MaxParallelImagePulls), true)
	}
	add("address", "address", c.Address, c.Address != "")
	add("port", "port", itoa(c.Port), c.Port != 0)
	add("tlsCertFile", "tls-cert-file", c.TLSCertFile, c.TLSCertFile != "")
	add("tlsPrivateKeyFile", "tls-private-key-file", c.TLSPrivateKeyFile, c.TLSPrivateKeyFile != "")
	// Plain booleans upstream: only true can be told from absent.
	add("rotateCertificates", "rotate-certificates", "true", c.RotateCertificates)
	add("serverTLSBootstrap", "rotate-server-certificates", "true", c.ServerTLSBootstrap)
	out = append(out, f.accessSettings()...)
	if c.HealthzPort != nil {
		add("healthzPort", "healthz-port", itoa(*c.HealthzPort), true)
	}
	add("healthzBindAddress", "healthz-bind-address", c.HealthzBindAddress, c.HealthzBindAddress != "")
	add("containerRuntimeEndpoint", "container-runtime-endpoint", c.ContainerRuntimeEndpoint, c.ContainerRuntimeEndpoint != "")
	add("registerWithTaints", "register-with-taints", joinTaints(c.RegisterWithTaints), len(c.RegisterWithTaints) > 0)
	if c.ResolverConfig != nil {
		add("resolvConf", "resolv-conf", *c.ResolverConfig, true)
	}
	if c.KubeAPIQPS != nil {
		add("kubeAPIQPS", "kube-api-qps", itoa(*c.KubeAPIQPS), true)
	}
	add("kubeAPIBurst", "kube-api-burst", itoa(c.KubeAPIBurst), c.KubeAPIBurst != 0)
	if c.ImageGCHighThresholdPercent != nil {
		add("imageGCHighThresholdPercent", "image-gc-high-threshold", itoa(*c.ImageGCHighThresholdPercent), true)
	}
	if c.ImageGCLowThresholdPercent != nil {
		add("imageGCLowThresholdPercent", "image-gc-low-threshold", itoa(*c.ImageGCLowThresholdPercent), true)
	}
	add("imageMinimumGCAge", "minimum-image-ttl-duration", c.ImageMinimumGCAge.Duration.String(), c.ImageMinimumGCAge.Duration != 0)
	add("volumeStatsAggPeriod", "volume-stats-agg-period", c.VolumeStatsAggPeriod.Duration.String(), c.VolumeStatsAggPeriod.Duration != 0)
	return append(out, f.evictionSettings()...)
}

// accessSettings maps authentication and authorization: upstream
// kubelet's flags for the node API's access control.
func (f *File) accessSettings() []Setting {
	authn, authz := &f.Config.Authentication, &f.Config.Authorization
	var out []Setting
	add := func(field, flag, value string, set bool) {
		if set {
			out = append(out, Setting{Field: field, Flag: flag, Value: value})
		}
	}
	add("authentication.x509.clientCAFile", "client-ca-file", authn.X509.ClientCAFile, authn.X509.ClientCAFile != "")
	if authn.Anonymous.Enabled != nil {
		add("authentication.anonymous.enabled", "anonymous-auth", strconv.FormatBool(*authn.Anonymous.Enabled), true)
	}
	if authn.Webhook.Enabled != nil {
		add("authentication.webhook.enabled", "authentication-token-webhook", strconv.FormatBool(*authn.Webhook.Enabled), true)
	}
	ttl := authn.Webhook.CacheTTL.Duration
	add("authentication.webhook.cacheTTL", "authentication-token-webhook-cache-ttl", ttl.String(), ttl != 0)
	add("authorization.mode", "authorization-mode", string(authz.Mode), authz.Mode != "")
	ttl = authz.Webhook.CacheAuthorizedTTL.Duration
	add("authorization.webhook.cacheAuthorizedTTL", "authorization-webhook-cache-authorized-ttl", ttl.String(), ttl != 0)
	ttl = authz.Webhook.CacheUnauthorizedTTL.Duration
	add("authorization.webhook.cacheUnauthorizedTTL", "authorization-webhook-cache-unauthorized-ttl", ttl.String(), ttl != 0)
	return out
}

// evictionSettings maps the eviction and container log fields. Without
// mergeDefaultEvictionSettings an evictionHard replaces upstream's
// defaults (signals it does not name have no threshold), as upstream.
func (f *File) evictionSettings() []Setting {
	c := &f.Config
	var out []Setting
	add := func(field, flag, value string, set bool) {
		if set {
			out = append(out, Setting{Field: field, Flag: flag, Value: value})
		}
	}
	hard := c.EvictionHard
	if len(hard) > 0 && c.MergeDefaultEvictionSettings != nil && *c.MergeDefaultEvictionSettings {
		hard = maps.Clone(defaultEvictionHard)
		maps.Copy(hard, c.EvictionHard)
	}
	add("evictionHard", "eviction-hard", joinMapSep(hard, "<"), len(hard) > 0)
	add("evictionSoft", "eviction-soft", joinMapSep(c.EvictionSoft, "<"), len(c.EvictionSoft) > 0)
	add("evictionSoftGracePeriod", "eviction-soft-grace-period", joinMap(c.EvictionSoftGracePeriod), len(c.EvictionSoftGracePeriod) > 0)
	add("evictionMinimumReclaim", "eviction-minimum-reclaim", joinMap(c.EvictionMinimumReclaim), len(c.EvictionMinimumReclaim) > 0)
	d := c.EvictionPressureTransitionPeriod.Duration
	add("evictionPressureTransitionPeriod", "eviction-pressure-transition-period", d.String(), d != 0)
	add("evictionMaxPodGracePeriod", "eviction-max-pod-grace-period", itoa(c.EvictionMaxPodGracePeriod), c.EvictionMaxPodGracePeriod != 0)
	add("containerLogMaxSize", "container-log-max-size", c.ContainerLogMaxSize, c.ContainerLogMaxSize != "")
	if c.ContainerLogMaxFiles != nil {
		add("containerLogMaxFiles", "container-log-max-files", itoa(*c.ContainerLogMaxFiles), true)
	}
	add("allowedUnsafeSysctls", "allowed-unsafe-sysctls", strings.Join(c.AllowedUnsafeSysctls, ","), len(c.AllowedUnsafeSysctls) > 0)
	return out
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// joinMap writes a resource map as --system-reserved does: cpu=1,memory=1Gi.
func joinMap(m map[string]string) string { return joinMapSep(m, "=") }

// joinMapSep writes a map with sep between key and value, sorted:
// --eviction-hard's is "<" (memory.available<100Mi).
func joinMapSep(m map[string]string, sep string) string {
	kv := make([]string, 0, len(m))
	for k, v := range m {
		kv = append(kv, k+sep+v)
	}
	sort.Strings(kv)
	return strings.Join(kv, ",")
}

// joinTaints writes taints as --register-with-taints does: key=value:Effect.
func joinTaints(taints []corev1.Taint) string {
	out := make([]string, 0, len(taints))
	for _, t := range taints {
		out = append(out, t.ToString())
	}
	return strings.Join(out, ",")
}
