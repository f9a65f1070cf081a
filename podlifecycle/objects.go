package podlifecycle

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/tokens"
)

// ObjectSource gives the ConfigMaps and Secrets of a pod's namespace that
// its containers' env and its imagePullSecrets name (and, through
// volumes.Sources, its volumes); a missing one is an error for which
// apierrors.IsNotFound holds.
type ObjectSource interface {
	ConfigMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error)
	Secret(ctx context.Context, ns, name string) (*corev1.Secret, error)
}

// APIObjects reads ConfigMaps and Secrets straight from the API server,
// for env when a container is created and for volumes at each sync
// (upstream's "Get" strategy): always current, no watch per object, one
// GET per object and sync.
type APIObjects struct{ Client kubernetes.Interface }

const envSourceTimeout = 10 * time.Second

func (s APIObjects) ConfigMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error) {
	ctx, cancel := context.WithTimeout(ctx, envSourceTimeout)
	defer cancel()
	return s.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
}

func (s APIObjects) Secret(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	ctx, cancel := context.WithTimeout(ctx, envSourceTimeout)
	defer cancel()
	return s.Client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
}

// PersistentVolumeClaim reads a claim, for persistentVolumeClaim volumes.
func (s APIObjects) PersistentVolumeClaim(ctx context.Context, ns, name string) (*corev1.PersistentVolumeClaim, error) {
	ctx, cancel := context.WithTimeout(ctx, envSourceTimeout)
	defer cancel()
	return s.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
}

// PersistentVolume reads the volume a claim is bound to.
func (s APIObjects) PersistentVolume(ctx context.Context, name string) (*corev1.PersistentVolume, error) {
	ctx, cancel := context.WithTimeout(ctx, envSourceTimeout)
	defer cancel()
	return s.Client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
}

// CSIDriver reads a CSIDriver, for CSI volumes.
func (s APIObjects) CSIDriver(ctx context.Context, name string) (*storagev1.CSIDriver, error) {
	ctx, cancel := context.WithTimeout(ctx, envSourceTimeout)
	defer cancel()
	return s.Client.StorageV1().CSIDrivers().Get(ctx, name, metav1.GetOptions{})
}

// VolumeAttachment reads the attachment of a CSI volume to this node
// (the Node authorizer lets a node get those of its pods' volumes).
func (s APIObjects) VolumeAttachment(ctx context.Context, name string) (*storagev1.VolumeAttachment, error) {
	ctx, cancel := context.WithTimeout(ctx, envSourceTimeout)
	defer cancel()
	return s.Client.StorageV1().VolumeAttachments().Get(ctx, name, metav1.GetOptions{})
}

// VolumeObjects is what the volumes manager reads: ConfigMaps and Secrets
// from the API server, ServiceAccount tokens from the node's token cache.
type VolumeObjects struct {
	APIObjects
	*tokens.Manager
}

// envObjects fetches what the container's env refers to. Objects that do
// not exist are left out (the spec builder then fails a required
// reference and skips an optional one); any other error fails.
func (s *Syncer) envObjects(ctx context.Context, pod *corev1.Pod, c *corev1.Container) (runtime.EnvObjects, error) {
	cms, secs := runtime.EnvReferences(c)
	objs := runtime.EnvObjects{ConfigMaps: map[string]*corev1.ConfigMap{}, Secrets: map[string]*corev1.Secret{}}
	if (len(cms) > 0 || len(secs) > 0) && s.cfg.Objects == nil {
		return objs, fmt.Errorf("container %s refers to ConfigMaps or Secrets and this node has no source of them", c.Name)
	}
	for _, name := range cms {
		cm, err := s.cfg.Objects.ConfigMap(ctx, pod.Namespace, name)
		if err != nil && !apierrors.IsNotFound(err) {
			return objs, fmt.Errorf("get configmap %s/%s: %w", pod.Namespace, name, err)
		}
		if err == nil && cm != nil {
			objs.ConfigMaps[name] = cm
		}
	}
	for _, name := range secs {
		sec, err := s.cfg.Objects.Secret(ctx, pod.Namespace, name)
		if err != nil && !apierrors.IsNotFound(err) {
			return objs, fmt.Errorf("get secret %s/%s: %w", pod.Namespace, name, err)
		}
		if err == nil && sec != nil {
			objs.Secrets[name] = sec
		}
	}
	return objs, nil
}
