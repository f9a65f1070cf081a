package volumes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Sources is what the Manager needs of the API server: the ConfigMaps and
// Secrets named by configMap, secret and projected volumes. The Manager
// asks once per volume (per projected source) at every SetupPod and
// UpdatePod, so an informer-backed lister suits better than a GET each
// time. A missing object must come back as an error for which
// apierrors.IsNotFound holds (what client-go and listers return, or
// apierrors.NewNotFound), so that optional volumes and keys work; any
// other error fails the volume and keeps its previous content.
//
// ServiceAccountToken gives a token of namespace/serviceAccount for spec
// (projected serviceAccountToken sources); it is asked at every sync and
// must answer from a cache while the token is fresh (package tokens).
type Sources interface {
	ConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error)
	Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
	ServiceAccountToken(ctx context.Context, namespace, serviceAccount string, spec authenticationv1.TokenRequestSpec) (*authenticationv1.TokenRequest, error)
}

// errNoSources fails configMap and secret volumes of a Manager without
// Sources.
var errNoSources = errors.New("no source of ConfigMaps and Secrets configured")

// configMapData returns the data of a ConfigMap, binaryData included; nil
// (and no error) if it does not exist and optional is set.
func configMapData(ctx context.Context, src Sources, ns, name string, optional bool) (map[string][]byte, error) {
	if src == nil {
		return nil, fmt.Errorf("get configMap %s/%s: %w", ns, name, errNoSources)
	}
	cm, err := src.ConfigMap(ctx, ns, name)
	if err != nil {
		if apierrors.IsNotFound(err) && optional {
			return nil, nil
		}
		return nil, fmt.Errorf("get configMap %s/%s: %w", ns, name, err)
	}
	data := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return data, nil
}

// secretData returns the data of a Secret; nil (and no error) if it does
// not exist and optional is set.
func secretData(ctx context.Context, src Sources, ns, name string, optional bool) (map[string][]byte, error) {
	if src == nil {
		return nil, fmt.Errorf("get secret %s/%s: %w", ns, name, errNoSources)
	}
	s, err := src.Secret(ctx, ns, name)
	if err != nil {
		if apierrors.IsNotFound(err) && optional {
			return nil, nil
		}
		return nil, fmt.Errorf("get secret %s/%s: %w", ns, name, err)
	}
	return s.Data, nil
}

func configMapPayload(ctx context.Context, src Sources, ns string, s *corev1.ConfigMapVolumeSource) (map[string]FileProjection, error) {
	opt := isTrue(s.Optional)
	data, err := configMapData(ctx, src, ns, s.Name, opt)
	if err != nil {
		return nil, err
	}
	return KeysPayload("configMap "+s.Name, data, s.Items, modeOr(s.DefaultMode), opt)
}

func secretPayload(ctx context.Context, src Sources, ns string, s *corev1.SecretVolumeSource) (map[string]FileProjection, error) {
	opt := isTrue(s.Optional)
	data, err := secretData(ctx, src, ns, s.SecretName, opt)
	if err != nil {
		return nil, err
	}
	return KeysPayload("secret "+s.SecretName, data, s.Items, modeOr(s.DefaultMode), opt)
}

// KeysPayload is the payload of a configMap or secret volume (or projected
// source) as upstream builds it: without items every key becomes a file of
// its name; with items only the listed keys, each at its path. A file gets
// the item's mode, else defaultMode. A listed key missing from data is an
// error unless optional. what names the object in errors ("configMap x").
func KeysPayload(what string, data map[string][]byte, items []corev1.KeyToPath, defaultMode int32, optional bool) (map[string]FileProjection, error) {
	def, err := fileMode(defaultMode)
	if err != nil {
		return nil, fmt.Errorf("%s: defaultMode: %w", what, err)
	}
	payload := make(map[string]FileProjection, len(data))
	if len(items) == 0 {
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			payload[k] = FileProjection{Data: data[k], Mode: def}
		}
		return payload, nil
	}
	for _, it := range items {
		content, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return nil, fmt.Errorf("%s references non-existent key %q", what, it.Key)
		}
		mode := def
		if it.Mode != nil {
			if mode, err = fileMode(*it.Mode); err != nil {
				return nil, fmt.Errorf("%s: mode of key %q: %w", what, it.Key, err)
			}
		}
		payload[it.Path] = FileProjection{Data: content, Mode: mode}
	}
	return payload, nil
}

// fileMode converts an API mode (0 to 0777) to permission bits.
func fileMode(m int32) (os.FileMode, error) {
	if m < 0 || m > 0o777 {
		return 0, fmt.Errorf("mode %#o is not within 0 and 0777", m)
	}
	return os.FileMode(m), nil
}

// modeOr returns *m, or 0644 (upstream's default mode of configMap,
// secret, downwardAPI and projected volumes) when m is nil.
func modeOr(m *int32) int32 {
	if m == nil {
		return corev1.ConfigMapVolumeSourceDefaultMode
	}
	return *m
}

func isTrue(b *bool) bool { return b != nil && *b }
