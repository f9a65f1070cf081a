package aggregator

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodelet/nodelet/controlplane/pki"
)

// authConfigMap is kube-system/extension-apiserver-authentication, which
// extension API servers read (through the Role
// extension-apiserver-authentication-reader) to learn whom to believe:
// client certificates of the cluster CA, and front-proxy headers only
// from a certificate of the front-proxy CA named front-proxy-client.
const authConfigMap = "extension-apiserver-authentication"

// authConfigData is the ConfigMap's data, with upstream's keys and its
// JSON-array encoding of the header lists.
func authConfigData(clientCA []byte, fp *pki.FrontProxy) map[string]string {
	list := func(v ...string) string {
		b, _ := json.Marshal(v)
		return string(b)
	}
	return map[string]string{
		"client-ca-file":                     string(clientCA),
		"requestheader-client-ca-file":       string(fp.CAPEM),
		"requestheader-allowed-names":        list(pki.FrontProxyUser),
		"requestheader-username-headers":     list("X-Remote-User"),
		"requestheader-uid-headers":          list("X-Remote-Uid"),
		"requestheader-group-headers":        list("X-Remote-Group"),
		"requestheader-extra-headers-prefix": list("X-Remote-Extra-"),
	}
}

// ensureAuthConfig writes the ConfigMap when it is missing or differs.
func ensureAuthConfig(ctx context.Context, client kubernetes.Interface, data map[string]string) error {
	cms := client.CoreV1().ConfigMaps(metav1.NamespaceSystem)
	cur, err := cms.Get(ctx, authConfigMap, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: authConfigMap, Namespace: metav1.NamespaceSystem},
			Data: data}, metav1.CreateOptions{})
	case err == nil && !equality.Semantic.DeepEqual(cur.Data, data):
		cur.Data = data
		_, err = cms.Update(ctx, cur, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("write %s/%s: %w", metav1.NamespaceSystem, authConfigMap, err)
	}
	return nil
}
