package nodelet

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodelet/nodelet/eviction"
	"github.com/nodelet/nodelet/nodeapi"
	"github.com/nodelet/nodelet/nodestatus"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/containerd"
	"github.com/nodelet/nodelet/sdnotify"
)

// DefaultPodInfraImage is the pause image the nodelet builds and imports.
const DefaultPodInfraImage = "registry.k8s.io/pause:3.10-nodelet"

// DefaultRootDir is the nodelet's state directory.
const DefaultRootDir = "/var/lib/nodelet"

// Config configures the node agent. Zero fields take the defaults of the
// packages they go to.
type Config struct {
	// RestConfig reaches the API server; Client, when set, is used
	// instead. With neither, Kubeconfig is loaded (see Credentials).
	RestConfig *rest.Config
	Client     kubernetes.Interface
	// Credentials say where the node's kubeconfig and certificates are,
	// and whether the control plane issues and renews them.
	Credentials Credentials
	NodeName    string
	RootDir     string // DefaultRootDir when empty

	ContainerdAddress   string
	ContainerdNamespace string // containerd.DefaultNamespace ("nodelet") when empty
	// RuncRoot and StateDir: see containerd.Config (tests keep them private).
	RuncRoot, StateDir string
	// RuntimeBinary is the OCI runtime the shim runs (runc when empty;
	// --runtime-binary, e.g. crun): see containerd.Config.
	RuntimeBinary string
	// RuntimeHandlers maps RuntimeClass handlers to OCI runtimes
	// (--runtime-handlers): see containerd.Config.
	RuntimeHandlers map[string]string
	// LogRoot holds the pods' CRI logs (runtime.DefaultLogRoot when empty).
	LogRoot string
	// LoggerCommand starts the node's container logger (the nodelet
	// binary's container-logger subcommand; see containerlogs) when none
	// answers on RootDir/logger; it writes every container's log and
	// outlives the nodelet. Empty: the nodelet copies the output itself.
	LoggerCommand []string
	// ContainerLogMaxSize (bytes) and ContainerLogMaxFiles rotate the
	// containers' logs (--container-log-max-size, --container-log-max-files;
	// upstream's 10Mi and 5 when 0).
	ContainerLogMaxSize  int64
	ContainerLogMaxFiles int

	CNIBinDirs []string
	CNIConfDir string
	// NetNSDir, BridgeName and NetworkName: see network.Config. The CNI
	// cache and IPAM state live under RootDir. NetNSDir defaults to
	// network.DefaultNetNSDir with the default RootDir, else RootDir/netns.
	NetNSDir, BridgeName, NetworkName string

	// LockFile (default RootDir/nodelet.lock) keeps a second nodelet off
	// the same root directory; a lock beside the containerd socket keeps
	// one off the same containerd namespace.
	LockFile string

	CgroupDriver string // "", "cgroupfs" or "systemd"
	CgroupRoot   string

	PodInfraImage string // DefaultPodInfraImage when empty
	// PauseBinary is the static pause program the pause image is built
	// from when containerd lacks it; default: "pause" next to the
	// running executable.
	PauseBinary string
	// ImageDir holds image tarballs imported at start (air-gapped nodes).
	ImageDir string

	NodeIP  string
	PodCIDR string
	// LocalPathDir keeps the volumes of the local-path StorageClass the
	// control plane provisions on this node (default RootDir/storage),
	// published on the Node for the provisioner (--local-path-dir).
	LocalPathDir string
	// AllowedUnsafeSysctls are the sysctls (names, or patterns ending in
	// *) pods may set beside the safe ones (--allowed-unsafe-sysctls).
	AllowedUnsafeSysctls []string
	// SystemReserved and KubeReserved are taken off the node's capacity
	// to give its allocatable (--system-reserved, --kube-reserved).
	SystemReserved, KubeReserved corev1.ResourceList
	// RegistryConfigDir holds containerd's hosts.toml files (mirrors,
	// insecure registries); MaxParallelImagePulls: see
	// containerd.RegistryConfig (0: serialized, as --serialize-image-pulls).
	RegistryConfigDir     string
	MaxParallelImagePulls int
	// ClusterDNS are the cluster DNS IPs the pods' resolv.conf names; the
	// nodelet serves them itself (package clusterdns, on a local dummy
	// interface) for ClusterDomain. Empty: no cluster DNS.
	ClusterDNS    []string
	ClusterDomain string

	// The container garbage collection (once a minute, as upstream's
	// kubelet): a dead container may go MinimumContainerTTLDuration after
	// its creation (default 0); each container of a pod keeps its
	// MaximumDeadContainersPerContainer newest dead instances (0: the
	// default 1; < 0: no limit) and the node its MaximumDeadContainers
	// newest (0: the default, no limit; < 0: no limit). The latest
	// instance of a live pod's container is always kept.
	MaximumDeadContainersPerContainer int
	MaximumDeadContainers             int
	MinimumContainerTTLDuration       time.Duration
	// The image garbage collection (every 5 minutes, as upstream's
	// kubelet): when the image filesystem is ImageGCHighThresholdPercent
	// full (default 85; 100 never starts it), unused images go, least
	// recently used first, down to ImageGCLowThresholdPercent (default 80;
	// must be below the high one) — never one first seen less than
	// ImageMinimumGCAge ago (default 2m) nor the sandbox image.
	ImageGCHighThresholdPercent int
	ImageGCLowThresholdPercent  int
	ImageMinimumGCAge           time.Duration

	// The eviction manager (package eviction, upstream's defaults):
	// EvictionThresholds are the hard and soft thresholds (nil:
	// eviction.DefaultThresholds(), upstream's --eviction-hard default;
	// empty but not nil: none). A condition stays reported
	// EvictionPressureTransitionPeriod after its last threshold was met
	// (default 5m); soft evictions give a pod at most
	// EvictionMaxPodGracePeriod seconds (default 0). The manager measures
	// every EvictionMonitoringInterval (default 10s; tests shorten it).
	// OnEviction, optional, is told of each eviction's signal (the agent
	// counts kubelet_evictions{eviction_signal} itself, then calls it).
	EvictionThresholds               []eviction.Threshold
	EvictionPressureTransitionPeriod time.Duration
	EvictionMaxPodGracePeriod        int64
	EvictionMonitoringInterval       time.Duration
	OnEviction                       func(signal string)

	// VolumeStatsAggPeriod is how often the pods' volumes are measured
	// (--volume-stats-agg-period; zero: stats.DefaultVolumeInterval).
	VolumeStatsAggPeriod time.Duration

	// Address and Port are where the nodelet's HTTPS API listens (default
	// 0.0.0.0:10250; Port < 0 disables it). TLSCertFile and TLSKeyFile are
	// its serving certificate (self-signed when empty); ClientCAFile
	// verifies callers (default: the kubeconfig's CA).
	Address                 string
	Port                    int
	TLSCertFile, TLSKeyFile string
	ClientCAFile            string
	// Access is how the API authenticates and authorizes callers beside
	// client certificates, upstream kubelet's authentication and
	// authorization settings (the zero value: the configuration file's
	// defaults, nodeapi.DefaultAccessConfig: webhook authentication and
	// authorization by the API server).
	Access nodeapi.AccessConfig
	// HealthzBindAddress and HealthzPort are where GET /healthz answers
	// (default 127.0.0.1:10248; HealthzPort < 0 disables it): "ok" while
	// the PLEG relists and containerd answers, the systemd watchdog's test.
	HealthzBindAddress string
	HealthzPort        int

	// MaxPods is the node's pods capacity (nodestatus.DefaultMaxPods when
	// 0). NodeLabels and RegisterWithTaints are set on the Node when the
	// nodelet creates it.
	MaxPods int
	// PodPidsLimit caps the processes (threads included) of each pod's
	// cgroup, pids.max (--pod-max-pids, upstream's podPidsLimit); -1 or 0
	// leaves pods unlimited (but for kubepods' cap at the allocatable
	// pids, when --system-reserved or --kube-reserved reserves some).
	PodPidsLimit int64
	// OOMScoreAdj, when set, is written to the nodelet's own
	// oom_score_adj at start (--oom-score-adj, upstream's default -999);
	// where that is not permitted the nodelet keeps its score. Either way
	// its score is the floor of its pods' scores (cgroups.ClampOOMScoreAdj).
	OOMScoreAdj *int
	// SeccompDefault runs containers that name no seccompProfile under
	// RuntimeDefault (--seccomp-default, upstream's seccompDefault).
	SeccompDefault     bool
	NodeLabels         map[string]string
	RegisterWithTaints []corev1.Taint
	// ResolvConf is the node's resolv.conf, which pods of dnsPolicy
	// Default get; empty: /etc/resolv.conf, or none if it is missing.
	// A file named here must be readable at start.
	ResolvConf string
	// Notifier, when set, tells systemd when the node is ready and pings
	// its watchdog while the PLEG and containerd are healthy (cmd/nodelet
	// sets it; agents embedded in tests and the lab leave it nil).
	Notifier *sdnotify.Notifier
	Log      *slog.Logger
}

// Credentials are upstream kubelet's --kubeconfig, --bootstrap-kubeconfig,
// --cert-dir, --rotate-certificates and serverTLSBootstrap (package
// nodecerts).
type Credentials struct {
	// Kubeconfig is the node's kubeconfig, loaded when RestConfig and
	// Client are nil. With BootstrapKubeconfig, Run first makes sure it
	// holds a client certificate of the node that has not expired,
	// asking the control plane for one with the bootstrap credentials
	// (a token) and writing Kubeconfig to name it.
	Kubeconfig          string
	BootstrapKubeconfig string
	// CertDir holds the node's certificates and keys (default
	// RootDir/pki), upstream kubelet's files: kubelet-client-current.pem,
	// kubelet-server-current.pem.
	CertDir string
	// RotateCertificates renews the client certificate before it expires;
	// the API client follows without a restart.
	RotateCertificates bool
	// ServerTLSBootstrap asks the control plane for the HTTPS API's
	// serving certificate (for the node's names and addresses, once the
	// Node reports them) and renews it; TLSCertFile, if set, is served
	// until it is issued, else nothing is.
	ServerTLSBootstrap bool
	// KubeAPIQPS and KubeAPIBurst limit the client made from Kubeconfig
	// (zero: client-go's defaults).
	KubeAPIQPS   float32
	KubeAPIBurst int
}

func setAgentDefaults(cfg *Config) error {
	if cfg.RootDir == "" {
		cfg.RootDir = DefaultRootDir
	}
	if cfg.Credentials.CertDir == "" {
		cfg.Credentials.CertDir = filepath.Join(cfg.RootDir, "pki")
	}
	// The kubeconfig written names the pair file by this path, and a
	// relative one would be read relative to the kubeconfig's directory.
	if dir, err := filepath.Abs(cfg.Credentials.CertDir); err == nil {
		cfg.Credentials.CertDir = dir
	}
	if !filepath.IsAbs(cfg.RootDir) {
		return fmt.Errorf("nodelet: root dir %q is not absolute", cfg.RootDir)
	}
	if cfg.NetNSDir == "" && cfg.RootDir != DefaultRootDir {
		// Reconcile removes every netns of its directory that containerd
		// does not know: nodelets sharing a host must not share it.
		cfg.NetNSDir = filepath.Join(cfg.RootDir, "netns")
	}
	if cfg.LogRoot == "" {
		cfg.LogRoot = runtime.DefaultLogRoot
	}
	if cfg.LockFile == "" {
		cfg.LockFile = filepath.Join(cfg.RootDir, "nodelet.lock")
	}
	if cfg.LocalPathDir == "" {
		cfg.LocalPathDir = filepath.Join(cfg.RootDir, "storage")
	}
	if !filepath.IsAbs(cfg.LocalPathDir) {
		return fmt.Errorf("nodelet: local-path dir %q is not absolute", cfg.LocalPathDir)
	}
	if cfg.ContainerdNamespace == "" {
		cfg.ContainerdNamespace = containerd.DefaultNamespace
	}
	if cfg.PodInfraImage == "" {
		cfg.PodInfraImage = DefaultPodInfraImage
	}
	if cfg.PauseBinary == "" {
		if exe, err := os.Executable(); err == nil {
			cfg.PauseBinary = filepath.Join(filepath.Dir(exe), "pause")
		}
	}
	setServingDefaults(cfg)
	if cfg.MaxPods == 0 {
		cfg.MaxPods = nodestatus.DefaultMaxPods
	}
	if cfg.ClusterDomain == "" {
		cfg.ClusterDomain = "cluster.local"
	}
	if cfg.MaximumDeadContainersPerContainer == 0 {
		cfg.MaximumDeadContainersPerContainer = runtime.DefaultGCPolicy.MaxPerPodContainer
	}
	if cfg.MaximumDeadContainers == 0 {
		cfg.MaximumDeadContainers = runtime.DefaultGCPolicy.MaxContainers
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if err := checkLogConfig(cfg); err != nil {
		return err
	}
	return setImageGCDefaults(cfg)
}

// setServingDefaults fills in where the API and /healthz listen.
func setServingDefaults(cfg *Config) {
	if cfg.Address == "" {
		cfg.Address = "0.0.0.0"
	}
	if cfg.Port == 0 {
		cfg.Port = nodeapi.DefaultPort
	}
	if cfg.HealthzBindAddress == "" {
		cfg.HealthzBindAddress = "127.0.0.1"
	}
	if cfg.HealthzPort == 0 {
		cfg.HealthzPort = DefaultHealthzPort
	}
	if cfg.Access == (nodeapi.AccessConfig{}) {
		cfg.Access = nodeapi.DefaultAccessConfig()
	}
}

// setImageGCDefaults fills in upstream's image GC defaults and checks the
// thresholds.
func setImageGCDefaults(cfg *Config) error {
	def := runtime.DefaultImageGCPolicy
	if cfg.ImageGCHighThresholdPercent == 0 {
		cfg.ImageGCHighThresholdPercent = def.HighThresholdPercent
	}
	if cfg.ImageGCLowThresholdPercent == 0 {
		cfg.ImageGCLowThresholdPercent = def.LowThresholdPercent
	}
	if cfg.ImageMinimumGCAge == 0 {
		cfg.ImageMinimumGCAge = def.MinAge
	}
	p := runtime.ImageGCPolicy{HighThresholdPercent: cfg.ImageGCHighThresholdPercent,
		LowThresholdPercent: cfg.ImageGCLowThresholdPercent, MinAge: cfg.ImageMinimumGCAge}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("nodelet: %w", err)
	}
	return nil
}
