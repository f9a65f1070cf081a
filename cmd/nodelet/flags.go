package main

import (
	"flag"
	"os"
	"strings"
	"time"

	"github.com/nodelet/nodelet/eviction"
	"github.com/nodelet/nodelet/network"
	"github.com/nodelet/nodelet/nodeapi"
	"github.com/nodelet/nodelet/nodelet"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/containerd"
	"github.com/nodelet/nodelet/stats"
)

// options are the command line's values; finish turns them into the
// nodelet.Config.
type options struct {
	cfg                                                  nodelet.Config
	configFile, logLevel                                 string
	cniBinDirs, clusterDNS, systemReserved, kubeReserved string
	nodeLabels, taints, runtimeHandlers                  string
	apiQPS                                               float64
	apiBurst, maxPulls, healthzPort, oomScoreAdj         int
	serializePulls, version                              bool
	// The eviction flags in upstream's syntax, parsed by finish.
	evictionHard, evictionSoft, evictionSoftGrace, evictionMinReclaim string
	evictionMaxPodGrace                                               int
	containerLogMaxSize                                               string
	allowedUnsafeSysctls                                              string
	// The certificates' rotation defaults on when bootstrapping (the
	// serving certificate's only without --tls-cert-file), as kubeadm
	// configures its nodes.
	rotateCertificates, rotateServerCertificates optionalBool
	// fromFile maps the flags the --config file set to its fields, so
	// that a bad value names the field it came from.
	fromFile map[string]string
	// ignored are the file's fields the nodelet does not implement.
	ignored []string
}

// aliases are upstream kubelet's names for the nodelet's flags; both
// work, on the command line and (upstream's) in --config.
var aliases = map[string]string{
	"container-runtime-endpoint": "containerd-address",
	"hostname-override":          "node-name",
	"pod-infra-container-image":  "pod-infra-image",
}

// canonical is the nodelet's name of a flag given by either name.
func canonical(name string) string {
	if c, ok := aliases[name]; ok {
		return c
	}
	return name
}

// newFlagSet defines the flags on o.
func newFlagSet(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("nodelet", flag.ContinueOnError)
	cfg := &o.cfg
	hostname, _ := os.Hostname()
	fs.StringVar(&o.configFile, "config", "", "kubelet configuration file (kubelet.config.k8s.io/v1beta1 KubeletConfiguration); flags given on the command line win over it. "+
		"Fields the nodelet does not implement yet (memorySwap, featureGates, ...) are accepted and ignored with a warning")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	creds := &cfg.Credentials
	fs.StringVar(&creds.Kubeconfig, "kubeconfig", "", "kubeconfig file of the API server (required; with --bootstrap-kubeconfig, written when it holds no valid client certificate)")
	fs.StringVar(&creds.BootstrapKubeconfig, "bootstrap-kubeconfig", "", "kubeconfig with a bootstrap token (see `nodelet bootstrap-kubeconfig`) to ask the control plane for the node's client certificate "+
		"when --kubeconfig holds no valid one; --kubeconfig is then written, naming the certificate in --cert-dir")
	fs.StringVar(&creds.CertDir, "cert-dir", "", "directory of the node's certificates and keys, upstream kubelet's files (kubelet-client-current.pem, kubelet-server-current.pem) (default ROOT-DIR/pki)")
	fs.Var(&o.rotateCertificates, "rotate-certificates", "ask the control plane for a new client certificate before the current one expires (default: true with --bootstrap-kubeconfig)")
	fs.Var(&o.rotateServerCertificates, "rotate-server-certificates", "ask the control plane for the HTTPS API's serving certificate (signer kubernetes.io/kubelet-serving) and renew it before it expires; "+
		"nothing is served until it is issued (default: true with --bootstrap-kubeconfig and no --tls-cert-file)")
	fs.StringVar(&cfg.NodeName, "node-name", strings.ToLower(hostname), "name of the Node object")
	fs.StringVar(&cfg.RootDir, "root-dir", nodelet.DefaultRootDir, "nodelet state directory")
	fs.StringVar(&cfg.ContainerdAddress, "containerd-address", "/run/containerd/containerd.sock", "containerd socket (a path or unix://PATH)")
	fs.StringVar(&cfg.ContainerdNamespace, "containerd-namespace", containerd.DefaultNamespace, "containerd namespace of the pods")
	fs.StringVar(&cfg.RuntimeBinary, "runtime-binary", "", "OCI runtime the containerd shim runs, by name on containerd's PATH or by path (runc when empty; crun works too)")
	fs.StringVar(&o.runtimeHandlers, "runtime-handlers", "", "RuntimeClass handlers and the OCI runtime each runs pods with, handler=binary,... (e.g. crun=/usr/bin/crun); "+
		"the default handler runc is --runtime-binary unless named here, and pods of any other handler are refused")
	fs.StringVar(&o.cniBinDirs, "cni-bin-dir", strings.Join(network.DefaultBinDirs, ":"), "colon-separated CNI plugin directories")
	fs.StringVar(&cfg.CNIConfDir, "cni-conf-dir", network.DefaultConfDir, "CNI configuration directory")
	fs.StringVar(&cfg.BridgeName, "bridge-name", "", "Linux bridge of the generated CNI config (default "+network.DefaultBridgeName+")")
	fs.StringVar(&cfg.LocalPathDir, "local-path-dir", "", "directory of the volumes the built-in local-path StorageClass provisions on this node (default ROOT-DIR/storage)")
	fs.StringVar(&cfg.NetNSDir, "netns-dir", "", "directory of the pods' network namespaces (default "+network.DefaultNetNSDir+", or ROOT-DIR/netns with another --root-dir)")
	fs.StringVar(&cfg.LogRoot, "pod-log-dir", runtime.DefaultLogRoot, "root of the containers' CRI log files")
	fs.StringVar(&cfg.LockFile, "lock-file", "", "lock file that keeps a second nodelet off this root dir (default ROOT-DIR/nodelet.lock)")
	fs.StringVar(&cfg.CgroupDriver, "cgroup-driver", "", "cgroupfs or systemd (default: detected)")
	fs.StringVar(&cfg.CgroupRoot, "cgroup-root", "/", "cgroup under which kubepods is created")
	fs.StringVar(&cfg.PodInfraImage, "pod-infra-image", nodelet.DefaultPodInfraImage, "pause image")
	fs.StringVar(&cfg.PauseBinary, "pause-binary", "", "static pause binary the pause image is built from (default: pause next to nodelet)")
	fs.StringVar(&cfg.NodeIP, "node-ip", "", "node InternalIP (default: the address of the interface that routes to the API server; the default route's when the server is on loopback)")
	fs.StringVar(&cfg.PodCIDR, "pod-cidr", "", "pod CIDR (default: the one the control plane assigns)")
	fs.StringVar(&cfg.ImageDir, "image-dir", "", "directory of image tarballs imported at start")
	fs.StringVar(&o.clusterDNS, "cluster-dns", "", "comma-separated cluster DNS IPs: the pods' nameservers, which the nodelet serves itself on a local interface (empty: no cluster DNS)")
	fs.StringVar(&cfg.ClusterDomain, "cluster-domain", "cluster.local", "cluster DNS domain")
	fs.StringVar(&cfg.ResolvConf, "resolv-conf", "", "resolv.conf that pods of dnsPolicy Default get and whose nameservers the cluster DNS forwards other names to (default /etc/resolv.conf)")
	fs.StringVar(&o.systemReserved, "system-reserved", "", "resources kept for the OS, e.g. cpu=500m,memory=256Mi")
	fs.StringVar(&o.kubeReserved, "kube-reserved", "", "resources kept for the node's daemons, e.g. memory=128Mi")
	fs.IntVar(&cfg.MaxPods, "max-pods", 110, "pods capacity of the node")
	fs.IntVar(&o.oomScoreAdj, "oom-score-adj", -999, "oom_score_adj the nodelet gives itself at start, in [-1000, 1000] (kept as started where lowering it is not permitted)")
	fs.BoolVar(&cfg.SeccompDefault, "seccomp-default", false, "run containers that name no seccompProfile under RuntimeDefault (containerd's default profile) instead of unconfined")
	fs.Int64Var(&cfg.PodPidsLimit, "pod-max-pids", -1, "maximum number of processes in each pod (its cgroup's pids.max); -1: no limit of its own")
	fs.StringVar(&o.allowedUnsafeSysctls, "allowed-unsafe-sysctls", "", "comma-separated unsafe sysctls or patterns ending in * that pods may set beside the safe ones, e.g. kernel.msg*,net.core.somaxconn")
	fs.StringVar(&o.nodeLabels, "node-labels", "", "labels set when the Node is created, key=value,...")
	fs.StringVar(&o.taints, "register-with-taints", "", "taints set when the Node is created, key=value:Effect,...")
	fs.Float64Var(&o.apiQPS, "kube-api-qps", 50, "requests per second to the API server (as kubelet's default)")
	fs.IntVar(&o.apiBurst, "kube-api-burst", 100, "burst of requests to the API server")
	fs.StringVar(&cfg.Address, "address", "0.0.0.0", "IP address the nodelet's HTTPS API listens on")
	fs.IntVar(&cfg.Port, "port", nodeapi.DefaultPort, "port of the nodelet's HTTPS API (logs, exec, port-forward, stats); -1 disables it")
	fs.StringVar(&cfg.TLSCertFile, "tls-cert-file", "", "serving certificate of the HTTPS API, signed by the cluster CA (see controlplane serving-cert); default: self-signed")
	fs.StringVar(&cfg.TLSKeyFile, "tls-private-key-file", "", "private key of --tls-cert-file")
	fs.StringVar(&cfg.ClientCAFile, "client-ca-file", "", "CA bundle that callers' client certificates must chain to (default: the kubeconfig's CA)")
	// Access control of the HTTPS API, upstream kubelet's flags with the
	// defaults of its configuration file (not of its legacy flags, which
	// would allow anonymous callers everything).
	def := nodeapi.DefaultAccessConfig()
	fs.BoolVar(&cfg.Access.Anonymous, "anonymous-auth", false, "let requests to the HTTPS API without credentials through as system:anonymous (the authorizer still decides)")
	fs.BoolVar(&cfg.Access.Webhook, "authentication-token-webhook", def.Webhook, "authenticate bearer tokens to the HTTPS API with a TokenReview")
	fs.DurationVar(&cfg.Access.WebhookCacheTTL, "authentication-token-webhook-cache-ttl", def.WebhookCacheTTL, "how long token reviews are cached")
	fs.StringVar(&cfg.Access.AuthorizationMode, "authorization-mode", def.AuthorizationMode, "authorization of the HTTPS API: Webhook (a SubjectAccessReview) or AlwaysAllow")
	fs.DurationVar(&cfg.Access.AuthorizedTTL, "authorization-webhook-cache-authorized-ttl", def.AuthorizedTTL, "how long allowed answers of the authorization webhook are cached")
	fs.DurationVar(&cfg.Access.UnauthorizedTTL, "authorization-webhook-cache-unauthorized-ttl", def.UnauthorizedTTL, "how long refusals of the authorization webhook are cached")
	fs.StringVar(&cfg.HealthzBindAddress, "healthz-bind-address", "127.0.0.1", "IP address of the /healthz endpoint")
	fs.IntVar(&o.healthzPort, "healthz-port", nodelet.DefaultHealthzPort, "port of the /healthz endpoint (plain HTTP); 0 disables it")
	fs.StringVar(&cfg.RegistryConfigDir, "registry-config-dir", containerd.DefaultRegistryConfigDir, "containerd-style registry host configuration (<dir>/<host>/hosts.toml): mirrors, insecure registries")
	fs.BoolVar(&o.serializePulls, "serialize-image-pulls", true, "pull one image at a time")
	fs.IntVar(&o.maxPulls, "max-parallel-image-pulls", 0, "at most this many pulls at once with --serialize-image-pulls=false (0: no limit)")
	fs.IntVar(&cfg.MaximumDeadContainersPerContainer, "maximum-dead-containers-per-container", 1, "dead instances kept per container (the latest one of a live pod always stays)")
	fs.IntVar(&cfg.MaximumDeadContainers, "maximum-dead-containers", -1, "dead containers kept on the node (-1: no limit)")
	fs.DurationVar(&cfg.MinimumContainerTTLDuration, "minimum-container-ttl-duration", 0, "minimum age of a dead container before it is collected")
	fs.IntVar(&cfg.ImageGCHighThresholdPercent, "image-gc-high-threshold", 85, "image filesystem usage (percent) that starts image GC; 100 disables it")
	fs.IntVar(&cfg.ImageGCLowThresholdPercent, "image-gc-low-threshold", 80, "image filesystem usage (percent) image GC frees down to")
	fs.DurationVar(&cfg.ImageMinimumGCAge, "minimum-image-ttl-duration", 2*time.Minute, "minimum age of an unused image before image GC may remove it")
	fs.DurationVar(&cfg.VolumeStatsAggPeriod, "volume-stats-agg-period", stats.DefaultVolumeInterval, "how often the pods' volumes are measured for the summary API and kubelet_volume_stats_*")
	fs.StringVar(&o.evictionHard, "eviction-hard", eviction.DefaultHard, "hard eviction thresholds, signal<quantity or signal<percent,... (signals: memory.available, nodefs.available, nodefs.inodesFree, imagefs.available, imagefs.inodesFree, pid.available); \"\" disables them")
	fs.StringVar(&o.evictionSoft, "eviction-soft", "", "soft eviction thresholds, same syntax as --eviction-hard; each needs a grace period")
	fs.StringVar(&o.evictionSoftGrace, "eviction-soft-grace-period", "", "how long each soft threshold must be met before pods are evicted, signal=duration,... (e.g. memory.available=1m30s)")
	fs.StringVar(&o.evictionMinReclaim, "eviction-minimum-reclaim", "", "how far above its threshold a signal must come back before pressure ends, signal=quantity,... (e.g. imagefs.available=2Gi)")
	fs.DurationVar(&cfg.EvictionPressureTransitionPeriod, "eviction-pressure-transition-period", eviction.DefaultPressureTransitionPeriod, "how long a pressure condition stays after its thresholds stopped being met")
	fs.IntVar(&o.evictionMaxPodGrace, "eviction-max-pod-grace-period", 0, "maximum grace period (seconds) of pods evicted for a soft threshold; a pod's own shorter one wins")
	fs.StringVar(&o.containerLogMaxSize, "container-log-max-size", "10Mi", "size (quantity) at which a container's log file is rotated")
	fs.IntVar(&cfg.ContainerLogMaxFiles, "container-log-max-files", 5, "log files kept per container, the current one included (at least 2)")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	for alias, name := range aliases {
		fs.Var(fs.Lookup(name).Value, alias, "same as --"+name+" (kubelet's name)")
	}
	return fs
}
