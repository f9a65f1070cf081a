// Command nodelet is the node agent: it runs the pods the API server
// assigns to its node on containerd.
//
//	nodelet --kubeconfig FILE [flags]
//	nodelet cleanup-network    (uninstall: routes to other nodes, masquerade rule)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/network"
	"github.com/nodelet/nodelet/nodeapi"
	"github.com/nodelet/nodelet/nodelet"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/sdnotify"
)

func main() {
	// The containerd shim starts this binary as the containers' log driver.
	if runtime.IsLogDriver(os.Args[1:]) {
		runtime.RunLogDriver(os.Args[1:])
		return
	}
	if os.Getenv("GOGC") == "" {
		// A node agent lives next to the workloads: trade a little CPU for
		// a smaller heap (measured: RSS -10 MB idle, see docs/benchmarks.md).
		debug.SetGCPercent(50)
	}
	run := run
	if len(os.Args) > 1 && os.Args[1] == "cleanup-network" {
		run, os.Args = cleanupNetwork, os.Args[1:]
	}
	if err := run(os.Args[1:]); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "nodelet:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("nodelet", flag.ContinueOnError)
	var cfg nodelet.Config
	var apiQPS float64
	var apiBurst int
	var kubeconfig, cniBinDirs, clusterDNS, logLevel, systemReserved, kubeReserved string
	hostname, _ := os.Hostname()
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file of the API server (required)")
	fs.StringVar(&cfg.NodeName, "node-name", strings.ToLower(hostname), "name of the Node object")
	fs.StringVar(&cfg.RootDir, "root-dir", nodelet.DefaultRootDir, "nodelet state directory")
	fs.StringVar(&cfg.ContainerdAddress, "containerd-address", "/run/containerd/containerd.sock", "containerd socket")
	fs.StringVar(&cfg.ContainerdNamespace, "containerd-namespace", runtime.DefaultNamespace, "containerd namespace of the pods")
	fs.StringVar(&cniBinDirs, "cni-bin-dir", strings.Join(network.DefaultBinDirs, ":"), "colon-separated CNI plugin directories")
	fs.StringVar(&cfg.CNIConfDir, "cni-conf-dir", network.DefaultConfDir, "CNI configuration directory")
	fs.StringVar(&cfg.BridgeName, "bridge-name", "", "Linux bridge of the generated CNI config (default "+network.DefaultBridgeName+")")
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
	fs.StringVar(&clusterDNS, "cluster-dns", "", "comma-separated cluster DNS server IPs")
	fs.StringVar(&cfg.ClusterDomain, "cluster-domain", "cluster.local", "cluster DNS domain")
	fs.StringVar(&systemReserved, "system-reserved", "", "resources kept for the OS, e.g. cpu=500m,memory=256Mi")
	fs.StringVar(&kubeReserved, "kube-reserved", "", "resources kept for the node's daemons, e.g. memory=128Mi")
	fs.Float64Var(&apiQPS, "kube-api-qps", 50, "requests per second to the API server (as kubelet's default)")
	fs.IntVar(&apiBurst, "kube-api-burst", 100, "burst of requests to the API server")
	fs.StringVar(&cfg.Address, "address", "0.0.0.0", "IP address the nodelet's HTTPS API listens on")
	fs.IntVar(&cfg.Port, "port", nodeapi.DefaultPort, "port of the nodelet's HTTPS API (logs, exec, port-forward, stats); -1 disables it")
	fs.StringVar(&cfg.TLSCertFile, "tls-cert-file", "", "serving certificate of the HTTPS API, signed by the cluster CA (see controlplane serving-cert); default: self-signed")
	fs.StringVar(&cfg.TLSKeyFile, "tls-private-key-file", "", "private key of --tls-cert-file")
	fs.StringVar(&cfg.ClientCAFile, "client-ca-file", "", "CA bundle that callers' client certificates must chain to (default: the kubeconfig's CA)")
	fs.StringVar(&cfg.RegistryConfigDir, "registry-config-dir", runtime.DefaultRegistryConfigDir, "containerd-style registry host configuration (<dir>/<host>/hosts.toml): mirrors, insecure registries")
	serialize := fs.Bool("serialize-image-pulls", true, "pull one image at a time")
	maxPulls := fs.Int("max-parallel-image-pulls", 0, "at most this many pulls at once with --serialize-image-pulls=false (0: no limit)")
	fs.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if kubeconfig == "" {
		return fmt.Errorf("--kubeconfig is required")
	}
	switch {
	case *serialize && *maxPulls > 1:
		return fmt.Errorf("--max-parallel-image-pulls=%d needs --serialize-image-pulls=false", *maxPulls)
	case !*serialize && *maxPulls <= 0:
		cfg.MaxParallelImagePulls = -1 // no limit
	case !*serialize:
		cfg.MaxParallelImagePulls = *maxPulls
	}
	var err error
	if cfg.SystemReserved, err = parseResourceList(systemReserved); err != nil {
		return fmt.Errorf("--system-reserved: %w", err)
	}
	if cfg.KubeReserved, err = parseResourceList(kubeReserved); err != nil {
		return fmt.Errorf("--kube-reserved: %w", err)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := newLogger(level)
	slog.SetDefault(log)
	klog.SetSlogLogger(log)

	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig %s: %w", kubeconfig, err)
	}
	rc.QPS, rc.Burst = float32(apiQPS), apiBurst
	rc.UserAgent = "nodelet/" + cfg.NodeName
	cfg.RestConfig, cfg.Log = rc, log
	// READY=1 and watchdog pings when systemd runs the nodelet
	// (Type=notify); without NOTIFY_SOCKET it sends nothing.
	cfg.Notifier = sdnotify.New(sdnotify.Config{Log: log, ReadyStatus: "node " + cfg.NodeName + " running"})
	cfg.CNIBinDirs = filepath.SplitList(cniBinDirs)
	if clusterDNS != "" {
		cfg.ClusterDNS = strings.Split(clusterDNS, ",")
	}
	if exe, err := os.Executable(); err == nil {
		cfg.LogDriver = exe // container logs survive nodelet restarts
	}
	agent, err := nodelet.New(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return agent.Run(ctx)
}

// newLogger logs text to stderr; under systemd, whose journal stamps every
// line, without the time.
func newLogger(level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if sdnotify.StderrIsJournal() {
		opts.ReplaceAttr = sdnotify.DropTime
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

// parseResourceList parses "cpu=500m,memory=256Mi" as kubelet's
// --system-reserved does.
func parseResourceList(s string) (corev1.ResourceList, error) {
	if s == "" {
		return nil, nil
	}
	out := corev1.ResourceList{}
	for _, kv := range strings.Split(s, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("%q is not name=quantity", kv)
		}
		switch corev1.ResourceName(name) {
		case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage, corev1.ResourcePods:
		default:
			return nil, fmt.Errorf("unsupported resource %q (cpu, memory, ephemeral-storage, pods)", name)
		}
		q, err := resource.ParseQuantity(value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if q.Sign() < 0 {
			return nil, fmt.Errorf("%s: negative quantity %s", name, value)
		}
		out[corev1.ResourceName(name)] = q
	}
	return out, nil
}

// cleanupNetwork removes what the nodelet added to the host's network
// outside the pods: its routes to other nodes' pod CIDRs and its
// masquerade rule. For uninstalling; a running nodelet would put them back.
func cleanupNetwork(args []string) error {
	fs := flag.NewFlagSet("nodelet cleanup-network", flag.ContinueOnError)
	if err := fs.Parse(args); err != nil {
		return err
	}
	return network.Cleanup("")
}
