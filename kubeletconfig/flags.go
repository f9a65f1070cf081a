package kubeletconfig

import (
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

// mapped are the top-level fields Settings maps ("authentication" only
// for x509.clientCAFile).
var mapped = map[string]bool{
	"maxPods": true, "cgroupDriver": true, "cgroupRoot": true, "clusterDNS": true, "clusterDomain": true,
	"systemReserved": true, "kubeReserved": true, "podCIDR": true, "serializeImagePulls": true,
	"maxParallelImagePulls": true, "address": true, "port": true, "tlsCertFile": true,
	"tlsPrivateKeyFile": true, "healthzPort": true, "healthzBindAddress": true,
	"containerRuntimeEndpoint": true, "registerWithTaints": true, "resolvConf": true,
	"kubeAPIQPS": true, "kubeAPIBurst": true, "authentication": true,
	"imageGCHighThresholdPercent": true, "imageGCLowThresholdPercent": true, "imageMinimumGCAge": true,
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
	ca := c.Authentication.X509.ClientCAFile
	add("authentication.x509.clientCAFile", "client-ca-file", ca, ca != "")
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
	return out
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// joinMap writes a resource map as --system-reserved does: cpu=1,memory=1Gi.
func joinMap(m map[string]string) string {
	kv := make([]string, 0, len(m))
	for k, v := range m {
		kv = append(kv, k+"="+v)
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
