package main

import (
	"fmt"
	"net"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nodelet/nodelet/admission"
	"github.com/nodelet/nodelet/runtime"
)

// parseResourceList parses "cpu=500m,memory=256Mi" as kubelet's
// --system-reserved does.
func parseResourceList(s string) (corev1.ResourceList, error) {
	if s == "" {
		return nil, nil
	}
	out := corev1.ResourceList{}
	for _, kv := range strings.Split(s, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("%q is not name=quantity", kv)
		}
		switch corev1.ResourceName(name) {
		case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage, corev1.ResourcePods:
		default:
			return nil, fmt.Errorf("unsupported resource %q (cpu, memory, ephemeral-storage, pods)", name)
		}
		q, err := resource.ParseQuantity(value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if q.Sign() < 0 {
			return nil, fmt.Errorf("%s: negative quantity %s", name, value)
		}
		out[corev1.ResourceName(name)] = q
	}
	return out, nil
}

// parseLabels parses "k=v,k2=v2" as kubelet's --node-labels does.
func parseLabels(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return nil, fmt.Errorf("%q is not key=value", kv)
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, fmt.Errorf("label key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return nil, fmt.Errorf("label %s value %q: %s", k, v, strings.Join(errs, "; "))
		}
		out[k] = v
	}
	return out, nil
}

// parseRuntimeHandlers parses --runtime-handlers, "handler=binary,...":
// handlers are DNS labels, as RuntimeClass.handler must be. The default
// handler (runc) may be named only if --runtime-binary (binary) is unset
// or says the same, so that one flag does not silently override the other.
func parseRuntimeHandlers(s, binary string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		h, bin, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || bin == "" {
			return nil, fmt.Errorf("%q is not handler=binary", kv)
		}
		if errs := validation.IsDNS1123Label(h); len(errs) > 0 {
			return nil, fmt.Errorf("handler %q: %s", h, strings.Join(errs, "; "))
		}
		if _, dup := out[h]; dup {
			return nil, fmt.Errorf("handler %q named twice", h)
		}
		if h == runtime.DefaultRuntimeHandler && binary != "" && binary != bin {
			return nil, fmt.Errorf("handler %s=%s contradicts --runtime-binary=%s", h, bin, binary)
		}
		out[h] = bin
	}
	return out, nil
}

// parseTaints parses "key=value:Effect,key:Effect" as kubelet's
// --register-with-taints does.
func parseTaints(s string) ([]corev1.Taint, error) {
	if s == "" {
		return nil, nil
	}
	var out []corev1.Taint
	for _, spec := range strings.Split(s, ",") {
		kv, effect, ok := strings.Cut(strings.TrimSpace(spec), ":")
		if !ok {
			return nil, fmt.Errorf("taint %q has no effect (key=value:Effect)", spec)
		}
		t := corev1.Taint{Effect: corev1.TaintEffect(effect)}
		t.Key, t.Value, _ = strings.Cut(kv, "=")
		switch t.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			return nil, fmt.Errorf("taint %q: effect %q is not NoSchedule, PreferNoSchedule or NoExecute", spec, effect)
		}
		if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
			return nil, fmt.Errorf("taint key %q: %s", t.Key, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
			return nil, fmt.Errorf("taint %s value %q: %s", t.Key, t.Value, strings.Join(errs, "; "))
		}
		out = append(out, t)
	}
	return out, nil
}

// parseRuntimeEndpoint takes containerd's socket as a path or, as
// upstream's --container-runtime-endpoint, a unix:// URL.
func parseRuntimeEndpoint(s string) (string, error) {
	if path, ok := strings.CutPrefix(s, "unix://"); ok {
		s = path
	} else if scheme, _, ok := strings.Cut(s, "://"); ok {
		return "", fmt.Errorf("%q: scheme %s is not supported (a unix socket path or unix://PATH)", s, scheme)
	}
	if s == "" {
		return "", fmt.Errorf("empty socket path")
	}
	return s, nil
}

// checkIP refuses what is not an IP address.
func checkIP(s string) error {
	if net.ParseIP(s) == nil {
		return fmt.Errorf("%q is not an IP address", s)
	}
	return nil
}

// checkPort refuses ports outside min..65535.
func checkPort(p, min int) error {
	if p < min || p > 65535 {
		return fmt.Errorf("%d is out of range %d..65535", p, min)
	}
	return nil
}

// parseLogMaxSize reads --container-log-max-size as upstream: a quantity
// ("10Mi"), in bytes; 0 or negative is refused (the logger would rotate
// at every line).
func parseLogMaxSize(s string) (int64, error) {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", s, err)
	}
	if q.Sign() <= 0 {
		return 0, fmt.Errorf("%s is not positive", s)
	}
	return q.Value(), nil
}

// parseSysctlPatterns parses --allowed-unsafe-sysctls: comma-separated
// names or patterns ending in *, each known to be namespaced.
func parseSysctlPatterns(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []string
	for _, p := range strings.Split(s, ",") {
		out = append(out, strings.TrimSpace(p))
	}
	if _, err := admission.Sysctls(nil, out); err != nil {
		return nil, err
	}
	return out, nil
}
