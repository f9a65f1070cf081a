// Package fieldpath resolves the downward API: a pod's fields
// (fieldRef) and a container's resources (resourceFieldRef), for env
// variables and downwardAPI volumes alike, as upstream's pkg/fieldpath
// and resource helpers do. It imports no package of this project.
package fieldpath

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// PodField resolves a fieldRef path. podIPs and hostIPs are the pod's and
// the node's addresses (status.podIP, status.podIPs, status.hostIP,
// status.hostIPs); labels and annotations come as sorted key="value"
// lines, or one value with metadata.labels['key'].
func PodField(pod *corev1.Pod, fieldPath string, podIPs, hostIPs []string) (string, error) {
	if strings.HasPrefix(fieldPath, "metadata.labels[") || strings.HasPrefix(fieldPath, "metadata.annotations[") {
		base, key, ok := splitSubscript(fieldPath)
		if !ok {
			return "", fmt.Errorf("unsupported fieldPath %q", fieldPath)
		}
		if base == "metadata.labels" {
			return pod.Labels[key], nil
		}
		return pod.Annotations[key], nil
	}
	switch fieldPath {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return FormatMap(pod.Labels), nil
	case "metadata.annotations":
		return FormatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP":
		return first(podIPs), nil
	case "status.podIPs":
		return strings.Join(podIPs, ","), nil
	case "status.hostIP":
		return first(hostIPs), nil
	case "status.hostIPs":
		return strings.Join(hostIPs, ","), nil
	}
	return "", fmt.Errorf("unsupported fieldPath %q", fieldPath)
}

// splitSubscript splits "metadata.labels['key']" into its base and key.
func splitSubscript(p string) (base, key string, ok bool) {
	open := strings.Index(p, "[")
	if open < 0 || !strings.HasSuffix(p, "]") {
		return "", "", false
	}
	inner := p[open+1 : len(p)-1]
	if len(inner) < 2 || (inner[0] != '\'' && inner[0] != '"') || inner[len(inner)-1] != inner[0] {
		return "", "", false
	}
	return p[:open], inner[1 : len(inner)-1], true
}

// FormatMap renders labels or annotations as upstream: key="value" lines
// (Go-quoted values), sorted by key, no final newline.
func FormatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	lines := make([]string, 0, len(keys))
	for _, k := range keys {
		lines = append(lines, k+"="+strconv.Quote(m[k]))
	}
	return strings.Join(lines, "\n")
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// ContainerResource resolves a resourceFieldRef of container c (or of the
// container ref names): limits or requests of cpu, memory,
// ephemeral-storage or hugepages-<size>, divided by the divisor (1 when
// unset) and rounded up. A cpu, memory or ephemeral-storage limit that is
// unset or zero reads allocatable's value, as upstream.
func ContainerResource(pod *corev1.Pod, c *corev1.Container, ref *corev1.ResourceFieldSelector, allocatable corev1.ResourceList) (string, error) {
	if ref.ContainerName != "" && (c == nil || ref.ContainerName != c.Name) {
		if c = findContainer(pod, ref.ContainerName); c == nil {
			return "", fmt.Errorf("resourceFieldRef %s: container %q not found", ref.Resource, ref.ContainerName)
		}
	}
	if c == nil {
		return "", fmt.Errorf("resourceFieldRef %s: no container", ref.Resource)
	}
	kind, res, _ := strings.Cut(ref.Resource, ".")
	name := corev1.ResourceName(res)
	fallback := name == corev1.ResourceCPU || name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage
	if (!fallback && !strings.HasPrefix(res, corev1.ResourceHugePagesPrefix)) || (kind != "limits" && kind != "requests") {
		return "", fmt.Errorf("unsupported container resource %q", ref.Resource)
	}
	var q resource.Quantity
	if kind == "limits" {
		q = c.Resources.Limits[name]
		if q.IsZero() && fallback {
			q = allocatable[name]
		}
	} else {
		q = c.Resources.Requests[name]
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if name == corev1.ResourceCPU {
		return ceilDiv(q.MilliValue(), divisor.MilliValue(), ref.Resource)
	}
	return ceilDiv(q.Value(), divisor.Value(), ref.Resource)
}

// ceilDiv formats v/d rounded up, as upstream rounds resource values.
func ceilDiv(v, d int64, what string) (string, error) {
	if d <= 0 {
		return "", fmt.Errorf("resourceFieldRef %s: divisor must be positive", what)
	}
	n := v / d
	if v%d != 0 && v > 0 {
		n++
	}
	return strconv.FormatInt(n, 10), nil
}

func findContainer(pod *corev1.Pod, name string) *corev1.Container {
	for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}
