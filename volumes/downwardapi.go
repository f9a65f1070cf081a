package volumes

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/fieldpath"
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
	return fieldpath.PodField(pod, ref.FieldPath, nonEmpty(pod.Status.PodIP), nonEmpty(pod.Status.HostIP))
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// resourceFieldRefValue needs containerName, as upstream requires in volumes.
func resourceFieldRefValue(pod *corev1.Pod, ref *corev1.ResourceFieldSelector, allocatable corev1.ResourceList) (string, error) {
	if ref.ContainerName == "" {
		return "", fmt.Errorf("resourceFieldRef %s: containerName is required in a volume", ref.Resource)
	}
	return fieldpath.ContainerResource(pod, nil, ref, allocatable)
}
