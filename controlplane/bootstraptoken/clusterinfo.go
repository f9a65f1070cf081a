package bootstraptoken

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
)

// ClusterInfoConfig says what cluster-info tells joining nodes.
type ClusterInfoConfig struct {
	// Client writes kube-public/cluster-info (the loopback client).
	Client kubernetes.Interface
	// Server is the API server's URL as nodes reach it.
	Server string
	// CA is the cluster CA (PEM).
	CA  []byte
	Log *slog.Logger
}

// ClusterInfo publishes kube-public/cluster-info: a kubeconfig holding
// only the server and the CA, as kubeadm writes it. The bootstrap signer
// (upstream's controller) adds a jws-kubeconfig-ID signature per token.
type ClusterInfo struct {
	cfg ClusterInfoConfig
	log *slog.Logger
}

// NewClusterInfo prepares the publisher.
func NewClusterInfo(cfg ClusterInfoConfig) *ClusterInfo {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &ClusterInfo{cfg: cfg, log: cfg.Log.With("component", "cluster-info")}
}

// Kubeconfig is cluster-info's kubeconfig for server and ca: one cluster
// named "", as kubeadm's.
func Kubeconfig(server string, ca []byte) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[""] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster-info kubeconfig: %w", err)
	}
	return data, nil
}

// Run writes cluster-info (creating it, or replacing its kubeconfig when
// the server or CA changed, keeping the signatures' keys, which the
// signer recomputes), retrying while the API server is not answering; it
// returns once the ConfigMap is right.
func (c *ClusterInfo) Run(ctx context.Context) error {
	data, err := Kubeconfig(c.cfg.Server, c.cfg.CA)
	if err != nil {
		return err
	}
	err = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		if err := c.ensure(ctx, string(data)); err != nil {
			c.log.Debug("publish cluster-info", "err", err)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("publish %s/%s: %w", metav1.NamespacePublic, bootstrapapi.ConfigMapClusterInfo, err)
	}
	c.log.Info("published", "server", c.cfg.Server)
	return nil
}

func (c *ClusterInfo) ensure(ctx context.Context, kubeconfig string) error {
	cms := c.cfg.Client.CoreV1().ConfigMaps(metav1.NamespacePublic)
	cm, err := cms.Get(ctx, bootstrapapi.ConfigMapClusterInfo, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = cms.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: bootstrapapi.ConfigMapClusterInfo, Namespace: metav1.NamespacePublic},
			Data:       map[string]string{bootstrapapi.KubeConfigKey: kubeconfig},
		}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	if cm.Data[bootstrapapi.KubeConfigKey] == kubeconfig {
		return nil
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[bootstrapapi.KubeConfigKey] = kubeconfig
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	return err
}
