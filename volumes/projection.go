package volumes

import (
	"context"
	"errors"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
)

// projectionPlugin provides the volumes whose files are projected from the
// API by an AtomicWriter: configMap, secret, downwardAPI and projected.
// They are read-only for containers, as upstream, and rewritten whenever
// their content changes. Secret and projected volumes sit on a tmpfs so
// that secrets never reach the node's disk (upstream wraps them in a
// memory-backed emptyDir, sized as one without sizeLimit).
type projectionPlugin struct {
	name    string // upstream's escaped plugin name, the directory
	memory  bool   // on a tmpfs
	m       *Manager
	match   func(vol *corev1.Volume) bool
	payload func(ctx context.Context, pod *corev1.Pod, vol *corev1.Volume) (map[string]FileProjection, error)
}

func (p *projectionPlugin) handles(vol *corev1.Volume) bool { return p.match(vol) }
func (p *projectionPlugin) dirName() string                 { return p.name }
func (p *projectionPlugin) updatable() bool                 { return true }

// setup collects the payload first, so that a volume whose object is
// missing leaves no directory; then it makes the directory (a tmpfs for
// memory plugins, mounted again if it went away) and writes the payload if
// it differs from what is there.
func (p *projectionPlugin) setup(ctx context.Context, pod *corev1.Pod, vol *corev1.Volume, dir string) (Mount, error) {
	payload, err := p.payload(ctx, pod, vol)
	if err != nil {
		return Mount{}, err
	}
	if p.memory {
		err = setupTmpfs(dir, projectionDirPerm, TmpfsSize(p.m.allocatableMemory(), pod, nil), p.m.log)
	} else {
		err = setupDir(dir, projectionDirPerm)
	}
	if err != nil {
		return Mount{}, err
	}
	w := &AtomicWriter{Dir: dir, FSGroup: fsGroup(pod)}
	changed, err := w.Write(payload)
	if err != nil {
		return Mount{}, err
	}
	if changed {
		p.m.log.Debug("volume content written", "pod", podRef(pod), "volume", vol.Name, "plugin", p.name, "files", len(payload))
	}
	return Mount{HostPath: dir, ReadOnly: true, measure: measureDu}, nil
}

func (p *projectionPlugin) teardown(_ context.Context, dir string) error {
	return unmountAllBelow(dir)
}

func fsGroup(pod *corev1.Pod) *int64 {
	if sc := pod.Spec.SecurityContext; sc != nil {
		return sc.FSGroup
	}
	return nil
}

// projectedPayload merges the payloads of a projected volume's sources in
// order (a later source wins a path, API validation forbids clashes). All
// sources are tried; their errors come back joined.
func projectedPayload(ctx context.Context, src Sources, pod *corev1.Pod, s *corev1.ProjectedVolumeSource, allocatable corev1.ResourceList) (map[string]FileProjection, error) {
	def := modeOr(s.DefaultMode)
	payload := map[string]FileProjection{}
	var errs []error
	for i := range s.Sources {
		part, err := projectionSource(ctx, src, pod, &s.Sources[i], def, allocatable)
		if err != nil {
			errs = append(errs, fmt.Errorf("projected source %d: %w", i, err))
			continue
		}
		for k, v := range part {
			payload[k] = v
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return payload, nil
}

func projectionSource(ctx context.Context, src Sources, pod *corev1.Pod, vp *corev1.VolumeProjection, def int32, allocatable corev1.ResourceList) (map[string]FileProjection, error) {
	switch {
	case vp.ConfigMap != nil:
		opt := isTrue(vp.ConfigMap.Optional)
		data, err := configMapData(ctx, src, pod.Namespace, vp.ConfigMap.Name, opt)
		if err != nil {
			return nil, err
		}
		return KeysPayload("configMap "+vp.ConfigMap.Name, data, vp.ConfigMap.Items, def, opt)
	case vp.Secret != nil:
		opt := isTrue(vp.Secret.Optional)
		data, err := secretData(ctx, src, pod.Namespace, vp.Secret.Name, opt)
		if err != nil {
			return nil, err
		}
		return KeysPayload("secret "+vp.Secret.Name, data, vp.Secret.Items, def, opt)
	case vp.DownwardAPI != nil:
		return DownwardAPIPayload(pod, vp.DownwardAPI.Items, def, allocatable)
	case vp.ServiceAccountToken != nil:
		return tokenPayload(ctx, src, pod, vp.ServiceAccountToken, def)
	case vp.ClusterTrustBundle != nil:
		return nil, &UnsupportedError{Type: "projected clusterTrustBundle",
			Reason: "cluster trust bundles are not served by this cluster yet"}
	default:
		return nil, &UnsupportedError{Type: "projected source", Reason: "no known source set"}
	}
}

// tokenPayload is a serviceAccountToken source: a token of the pod's
// ServiceAccount ("default" when the pod names none), bound to the pod,
// for the source's audience (the API server's when empty) and lifetime
// (an hour by default), as upstream's kubelet requests it.
func tokenPayload(ctx context.Context, src Sources, pod *corev1.Pod, s *corev1.ServiceAccountTokenProjection, def int32) (map[string]FileProjection, error) {
	if src == nil {
		return nil, fmt.Errorf("serviceAccountToken: %w", errNoSources)
	}
	mode, err := fileMode(def)
	if err != nil {
		return nil, fmt.Errorf("serviceAccountToken: defaultMode: %w", err)
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	exp := int64(3600)
	if s.ExpirationSeconds != nil {
		exp = *s.ExpirationSeconds
	}
	spec := authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp,
		BoundObjectRef: &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}
	if s.Audience != "" {
		spec.Audiences = []string{s.Audience}
	}
	tr, err := src.ServiceAccountToken(ctx, pod.Namespace, sa, spec)
	if err != nil {
		return nil, fmt.Errorf("serviceAccountToken: %w", err)
	}
	return map[string]FileProjection{s.Path: {Data: []byte(tr.Status.Token), Mode: mode}}, nil
}
