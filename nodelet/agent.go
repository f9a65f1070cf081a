// Package nodelet wires the node agent and holds no pod logic: it builds
// the components from Config (setup.go: containerd, images, cgroups,
// network, volumes; wire.go: the status writers, the PLEG, the prober, the
// Syncer and pod workers, admission, eviction, the informers), connects
// them in one direction, runs their loops (run.go, pods.go) and stops them
// without killing a pod. What a pod's life is lives in podlifecycle.
package nodelet

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/nodelet/nodelet/containerlogs"
	"github.com/nodelet/nodelet/kubeletmetrics"
)

// housekeepingInterval re-syncs every pod and looks for orphans.
const housekeepingInterval = 10 * time.Second

// Agent is the node agent.
type Agent struct {
	cfg    Config
	client kubernetes.Interface
	log    *slog.Logger
	// metrics are served at the API's /metrics; the components record
	// into them through their own hooks.
	metrics *kubeletmetrics.Metrics
	// logs is the client of the node's container logger (containerlogs.go).
	logs *containerlogs.Client
}

// New checks cfg, fills in defaults and makes the API client.
func New(cfg Config) (*Agent, error) {
	if cfg.NodeName == "" || cfg.ContainerdAddress == "" {
		return nil, errors.New("nodelet: NodeName and ContainerdAddress are required")
	}
	if err := setAgentDefaults(&cfg); err != nil {
		return nil, err
	}
	client := cfg.Client
	if client == nil && cfg.RestConfig == nil && !cfg.Credentials.managed() {
		if cfg.Credentials.Kubeconfig == "" {
			return nil, errors.New("nodelet: RestConfig, Client or Credentials.Kubeconfig is required")
		}
		var err error
		if cfg.RestConfig, err = loadKubeconfig(&cfg); err != nil {
			return nil, err
		}
	}
	// With managed credentials the client is made by Run (connect).
	if client == nil && cfg.RestConfig != nil {
		var err error
		if client, err = kubernetes.NewForConfig(cfg.RestConfig); err != nil {
			return nil, fmt.Errorf("nodelet: API client: %w", err)
		}
	}
	m, err := kubeletmetrics.New(cfg.NodeName)
	if err != nil {
		return nil, fmt.Errorf("nodelet: %w", err)
	}
	// Evictions count in kubelet_evictions, then go to the caller's hook.
	if onEviction := cfg.OnEviction; onEviction != nil {
		cfg.OnEviction = func(signal string) { m.Evicted(signal); onEviction(signal) }
	} else {
		cfg.OnEviction = m.Evicted
	}
	return &Agent{cfg: cfg, client: client, log: cfg.Log.With("node", cfg.NodeName), metrics: m}, nil
}
