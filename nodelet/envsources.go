package nodelet

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// apiEnvSources reads the ConfigMaps and Secrets a container's env names
// straight from the API server when the container is created (upstream's
// "Get" strategy): always current, and no watch per object. Not-found
// errors pass through for optional references.
type apiEnvSources struct{ client kubernetes.Interface }

const envSourceTimeout = 10 * time.Second

func (s apiEnvSources) ConfigMap(ns, name string) (*corev1.ConfigMap, error) {
	ctx, cancel := context.WithTimeout(context.Background(), envSourceTimeout)
	defer cancel()
	return s.client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
}

func (s apiEnvSources) Secret(ns, name string) (*corev1.Secret, error) {
	ctx, cancel := context.WithTimeout(context.Background(), envSourceTimeout)
	defer cancel()
	return s.client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
}
