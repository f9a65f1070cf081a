// Command controlplane runs the nodelet control plane: the Kubernetes API
// server on embedded bbolt storage, the controllers and the scheduler.
//
//	controlplane --data-dir DIR [--bind-address IP] [--secure-port PORT] [--tls-san NAME]...
//	controlplane --version
//	controlplane kubeconfig --data-dir DIR --user NAME [--group G]... [--server URL]
//	controlplane serving-cert --data-dir DIR --node-name NAME --host IP|DNS... --cert-file F --key-file F
//	controlplane token create --data-dir DIR [--ttl D] [--description TEXT]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
	// CronJob time zones: validation and the CronJob controller load
	// spec.timeZone, which must not depend on the host's tzdata package
	// (kube-apiserver and kube-controller-manager embed it the same way).
	_ "time/tzdata"

	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/buildinfo"
	"github.com/nodelet/nodelet/controlplane"
	"github.com/nodelet/nodelet/controlplane/apiserver"
	"github.com/nodelet/nodelet/controlplane/controllers/podgc"
	"github.com/nodelet/nodelet/controlplane/controllers/upstream"
	"github.com/nodelet/nodelet/controlplane/pki"
	"github.com/nodelet/nodelet/sdnotify"
)

func main() {
	var err error
	switch {
	case len(os.Args) > 1 && os.Args[1] == "kubeconfig":
		err = kubeconfig(os.Args[2:])
	case len(os.Args) > 1 && os.Args[1] == "serving-cert":
		err = servingCert(os.Args[2:])
	case len(os.Args) > 1 && os.Args[1] == "token":
		err = token(os.Args[2:])
	default:
		err = run(os.Args[1:])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "controlplane:", err)
		os.Exit(1)
	}
}

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, strings.Split(v, ",")...); return nil }

func run(args []string) error {
	fs := flag.NewFlagSet("controlplane", flag.ContinueOnError)
	cfg := controlplane.Config{}
	var sans stringList
	fs.StringVar(&cfg.DataDir, "data-dir", "/var/lib/nodelet-controlplane", "directory for state, certificates and kubeconfigs")
	fs.StringVar(&cfg.BindAddress, "bind-address", "0.0.0.0", "address to serve HTTPS on")
	fs.IntVar(&cfg.SecurePort, "secure-port", 6443, "port to serve HTTPS on")
	fs.Var(&sans, "tls-san", "extra DNS name or IP for the serving certificate (repeatable)")
	fs.StringVar(&cfg.TokenAuthFile, "token-auth-file", "", "static bearer tokens: token,user,uid,\"group1,group2\" per line")
	fs.BoolVar(&cfg.AllowPrivileged, "allow-privileged", true, "allow pods with privileged containers (false refuses them, as upstream's kube-apiserver does by default; kubeadm turns it on)")
	fs.IntVar(&cfg.MaxRequestsInflight, "max-requests-inflight", apiserver.DefaultMaxRequestsInflight, "the most read-only requests served at once (more get 429); 0 for no limit")
	fs.IntVar(&cfg.MaxMutatingRequestsInflight, "max-mutating-requests-inflight", apiserver.DefaultMaxMutatingRequestsInflight, "the most mutating requests served at once (more get 429); 0 for no limit")
	fs.DurationVar(&cfg.RequestTimeout, "request-timeout", apiserver.DefaultRequestTimeout, "how long a request may take before it is cut off with 504, watches, exec, attach, logs, port-forward and proxy excepted; 0 for no limit")
	fs.StringVar(&cfg.Audit.PolicyFile, "audit-policy-file", "", "an audit.k8s.io/v1 Policy: which requests the audit log records, at which level")
	fs.StringVar(&cfg.Audit.LogPath, "audit-log-path", "", "the audit log file (JSON lines of audit.k8s.io/v1 events); - for standard output")
	fs.IntVar(&cfg.Audit.MaxSizeMB, "audit-log-maxsize", 0, "rotate the audit log at this size in megabytes (0: 100)")
	fs.IntVar(&cfg.Audit.MaxBackups, "audit-log-maxbackup", 0, "how many rotated audit logs to keep (0: all)")
	fs.IntVar(&cfg.Audit.MaxAgeDays, "audit-log-maxage", 0, "how many days to keep rotated audit logs (0: forever)")
	var etcdServers stringList
	fs.Var(&etcdServers, "etcd-servers", "etcd client URLs, comma-separated: keep every object in etcd v3 instead of bbolt in --data-dir")
	fs.StringVar(&cfg.Etcd.CAFile, "etcd-cafile", "", "CA of etcd's serving certificates (https etcd servers)")
	fs.StringVar(&cfg.Etcd.CertFile, "etcd-certfile", "", "client certificate for etcd")
	fs.StringVar(&cfg.Etcd.KeyFile, "etcd-keyfile", "", "client certificate's key for etcd")
	fs.StringVar(&cfg.Etcd.Prefix, "etcd-prefix", "/registry", "prefix of every key in etcd")
	fs.DurationVar(&cfg.Etcd.CompactionInterval, "etcd-compaction-interval", 5*time.Minute, "how often etcd's history is compacted, taking turns with other control planes; 0 never (etcd or another client compacts)")
	fs.StringVar(&cfg.EncryptionProviderConfig, "encryption-provider-config", "", "an EncryptionConfiguration file (apiserver.config.k8s.io/v1): the resources it names are encrypted at rest with its first provider")
	fs.DurationVar(&cfg.EventTTL, "event-ttl", apiserver.DefaultEventTTL, "how long Events are kept after they were last recorded; 0 keeps them forever")
	fs.BoolVar(&cfg.AnonymousAuth, "anonymous-auth", false, "treat requests without credentials as system:anonymous (group system:unauthenticated) instead of refusing them with 401")
	fs.StringVar(&cfg.AdvertiseAddress, "advertise-address", "", "address pods and nodes use to reach the API server (default: the bind address, or the host's first global address)")
	fs.StringVar(&cfg.ServiceCIDR, "service-cluster-ip-range", "10.96.0.0/12", "CIDR that Service cluster IPs are allocated from")
	fs.StringVar(&cfg.ClusterDNSIP, "cluster-dns-ip", "", "cluster IP of the kube-system/kube-dns Service, where the nodelets serve the cluster DNS (their --cluster-dns; default: the tenth address of --service-cluster-ip-range, 10.96.0.10)")
	fs.Int64Var(&cfg.NotReadyTolerationSeconds, "default-not-ready-toleration-seconds", 300, "tolerationSeconds added to pods for the not-ready taint")
	fs.Int64Var(&cfg.UnreachableTolerationSeconds, "default-unreachable-toleration-seconds", 300, "tolerationSeconds added to pods for the unreachable taint")
	fs.StringVar(&cfg.ClusterCIDR, "cluster-cidr", "10.244.0.0/16", "CIDR that node pod CIDRs are allocated from")
	fs.IntVar(&cfg.NodeCIDRMaskSize, "node-cidr-mask-size", 24, "prefix length of each node's pod CIDR")
	fs.DurationVar(&cfg.NodeMonitorGracePeriod, "node-monitor-grace-period", 50*time.Second, "how long a node may miss lease renewals before it is marked unhealthy")
	fs.IntVar(&cfg.TerminatedPodGCThreshold, "terminated-pod-gc-threshold", podgc.DefaultTerminatedPodMax, "number of terminated pods that can exist before the pod garbage collector deletes the oldest; 0 or less disables that part")
	fs.DurationVar(&cfg.HPASyncPeriod, "horizontal-pod-autoscaler-sync-period", upstream.DefaultHPASyncPeriod, "how often each HorizontalPodAutoscaler is reconciled")
	fs.DurationVar(&cfg.ClusterSigningDuration, "cluster-signing-duration", upstream.DefaultClusterSigningDuration, "the longest certificate the CertificateSigningRequest signers issue with the cluster CA")
	fs.DurationVar(&cfg.HPADownscaleStabilization, "horizontal-pod-autoscaler-downscale-stabilization", upstream.DefaultHPADownscaleStabilization, "how far back the autoscaler looks for its highest recommendation before scaling down")
	noElect := fs.Bool("no-leader-elect", false, "run controllers and scheduler without the leader lease (single control plane only)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	version := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *version {
		fmt.Println(buildinfo.String("controlplane"))
		return nil
	}
	cfg.TLSSANs = sans
	cfg.Etcd.Servers = etcdServers
	if cfg.Etcd.CompactionInterval == 0 {
		cfg.Etcd.CompactionInterval = -1 // upstream's 0: no compaction
	}
	cfg.DisableLeaderElection = *noElect
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	if sdnotify.StderrIsJournal() {
		opts.ReplaceAttr = sdnotify.DropTime // journald stamps every line
	}
	cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, opts))
	// client-go logs through klog; send it to the same place.
	klog.SetSlogLogger(cfg.Log)
	// READY=1 and watchdog pings when systemd runs the control plane
	// (Type=notify); without NOTIFY_SOCKET it sends nothing.
	cfg.Notifier = sdnotify.New(sdnotify.Config{Log: cfg.Log, ReadyStatus: "serving"})
	cp, err := controlplane.New(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return cp.Run(ctx)
}

// kubeconfig prints a kubeconfig with a freshly signed client certificate.
func kubeconfig(args []string) error {
	fs := flag.NewFlagSet("controlplane kubeconfig", flag.ContinueOnError)
	dataDir := fs.String("data-dir", "/var/lib/nodelet-controlplane", "the control plane's data directory (holds the CA)")
	user := fs.String("user", "", "user name (certificate common name)")
	server := fs.String("server", "", "API server URL to put in the kubeconfig (default: the URL the control plane serves on, for this machine; give the address other machines reach it at)")
	var groups stringList
	fs.Var(&groups, "group", "group (certificate organization), repeatable")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *user == "" {
		return errors.New("--user is required")
	}
	bundle, err := pki.LoadCA(*dataDir)
	if err != nil {
		return err
	}
	if *server == "" {
		if *server, err = bundle.ServedURL(); err != nil {
			return fmt.Errorf("%w (start the control plane once, or pass --server)", err)
		}
	}
	data, err := bundle.Kubeconfig(*server, *user, groups)
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(data)
	return err
}

// servingCert writes a nodelet's serving certificate and key, signed by the
// cluster CA for the node's names and addresses: the API server verifies
// the nodelet against the CA when it proxies logs, exec and port-forward,
// and the node never holds the CA key.
func servingCert(args []string) error {
	fs := flag.NewFlagSet("controlplane serving-cert", flag.ContinueOnError)
	dataDir := fs.String("data-dir", "/var/lib/nodelet-controlplane", "the control plane's data directory (holds the CA)")
	node := fs.String("node-name", "", "the node's name (certificate common name system:node:NAME; also a DNS name)")
	certFile := fs.String("cert-file", "", "where to write the certificate (PEM)")
	keyFile := fs.String("key-file", "", "where to write the private key (PEM, mode 0600)")
	days := fs.Int("days", 365, "validity in days")
	var hosts stringList
	fs.Var(&hosts, "host", "IP address or DNS name the nodelet is reached at, repeatable")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *node == "" || *certFile == "" || *keyFile == "" {
		return errors.New("--node-name, --cert-file and --key-file are required")
	}
	bundle, err := pki.LoadCA(*dataDir)
	if err != nil {
		return err
	}
	certPEM, keyPEM, err := bundle.SignServingCert("system:node:"+*node, append([]string{*node}, hosts...), time.Duration(*days)*24*time.Hour)
	if err != nil {
		return err
	}
	if err := os.WriteFile(*keyFile, keyPEM, 0o600); err != nil {
		return fmt.Errorf("write key: %w", err)
	}
	if err := os.WriteFile(*certFile, certPEM, 0o644); err != nil {
		return fmt.Errorf("write certificate: %w", err)
	}
	return nil
}
