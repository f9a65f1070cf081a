package volumes

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// DownwardAPIPayload is the payload of a downwardAPI volume (or projected
// source): one file per item, with the item's mode or defaultMode.
//
// fieldRef serves what upstream allows in volumes: metadata.name,
// metadata.namespace, metadata.uid, metadata.labels and
// metadata.annotations (all of them, one `key="value"` line each, sorted
// by key, as upstream formats them) and metadata.labels['key'],
// metadata.annotations['key']. Beyond upstream (whose API validation
// allows these in env only) it also serves spec.nodeName,
// spec.serviceAccountName, status.podIP and status.hostIP from pod as
// given, so status.podIP stays empty until the pod's status has an
// address and UpdatePod runs with it.
//
// resourceFieldRef needs containerName (as upstream requires in volumes;
// init containers count) and serves limits and requests of cpu, memory,
// ephemeral-storage and hugepages-<size>, divided by the divisor (1 when
// unset) and rounded up. A cpu, memory or ephemeral-storage limit the
// container leaves unset or zero reads allocatable's value instead.
//
// Every item is tried; the errors come back joined.
func DownwardAPIPayload(pod *corev1.Pod, items []corev1.DownwardAPIVolumeFile, defaultMode int32, allocatable corev1.ResourceList) (map[string]FileProjection, error) {
	def, err := fileMode(defaultMode)
	if err != nil {
		return nil, fmt.Errorf("downwardAPI: defaultMode: %w", err)
	}
	payload := make(map[string]FileProjection, len(items))
	var errs []error
	for _, it := range items {
		f := FileProjection{Mode: def}
		if it.Mode != nil {
			if f.Mode, err = fileMode(*it.Mode); err != nil {
				errs = append(errs, fmt.Errorf("downwardAPI item %q: %w", it.Path, err))
				continue
			}
		}
		var v string
		switch {
		case it.FieldRef != nil && it.ResourceFieldRef != nil:
			err = errors.New("fieldRef and resourceFieldRef are mutually exclusive")
		case it.FieldRef != nil:
			v, err = fieldRefValue(pod, it.FieldRef)
		case it.ResourceFieldRef != nil:
			v, err = resourceFieldRefValue(pod, it.ResourceFieldRef, allocatable)
		default:
			err = errors.New("neither fieldRef nor resourceFieldRef set")
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("downwardAPI item %q: %w", it.Path, err))
			continue
		}
		f.Data = []byte(v)
		payload[it.Path] = f
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return payload, nil
}

func fieldRefValue(pod *corev1.Pod, ref *corev1.ObjectFieldSelector) (string, error) {
	if ref.APIVersion != "" && ref.APIVersion != "v1" {
		return "", fmt.Errorf("fieldRef apiVersion %q is not supported, only v1", ref.APIVersion)
	}
	if p, key, ok := splitSubscript(ref.FieldPath); ok {
		switch p {
		case "metadata.labels":
			return pod.Labels[key], nil
		case "metadata.annotations":
			return pod.Annotations[key], nil
		}
		return "", fmt.Errorf("unsupported fieldPath %q", ref.FieldPath)
	}
	switch ref.FieldPath {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP":
		return pod.Status.PodIP, nil
	case "status.hostIP":
		return pod.Status.HostIP, nil
	}
	return "", fmt.Errorf("unsupported fieldPath %q", ref.FieldPath)
}

// splitSubscript splits "metadata.labels['key']" into the path and key.
func splitSubscript(fieldPath string) (string, string, bool) {
	s, ok := strings.CutSuffix(fieldPath, "']")
	if !ok {
		return "", "", false
	}
	p, key, ok := strings.Cut(s, "['")
	if !ok || p == "" {
		return "", "", false
	}
	return p, key, true
}

// formatMap renders labels or annotations as upstream: key="value" lines
// (the value quoted as Go does), sorted by key, no final newline.
func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	lines := make([]string, len(keys))
	for i, k := range keys {
		lines[i] = k + "=" + strconv.Quote(m[k])
	}
	return strings.Join(lines, "\n")
}

func resourceFieldRefValue(pod *corev1.Pod, ref *corev1.ResourceFieldSelector, allocatable corev1.ResourceList) (string, error) {
	if ref.ContainerName == "" {
		return "", fmt.Errorf("resourceFieldRef %s: containerName is required in a volume", ref.Resource)
	}
	c := findContainer(pod, ref.ContainerName)
	if c == nil {
		return "", fmt.Errorf("resourceFieldRef %s: container %q not found", ref.Resource, ref.ContainerName)
	}
	kind, res, _ := strings.Cut(ref.Resource, ".")
	name := corev1.ResourceName(res)
	fallback := name == corev1.ResourceCPU || name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage
	if !fallback && !strings.HasPrefix(res, corev1.ResourceHugePagesPrefix) || kind != "limits" && kind != "requests" {
		return "", fmt.Errorf("unsupported resourceFieldRef resource %q", ref.Resource)
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
	for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range cs {
			if cs[i].Name == name {
				return &cs[i]
			}
		}
	}
	return nil
}
