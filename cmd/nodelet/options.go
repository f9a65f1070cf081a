package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nodelet/nodelet/eviction"
	"github.com/nodelet/nodelet/kubeletconfig"
	"github.com/nodelet/nodelet/nodeapi"
)

// parseOptions parses the command line and, with --config, the kubelet
// configuration file under it: a flag given on the command line wins over
// the file, the file over the flag's default.
func parseOptions(args []string) (*options, error) {
	o := &options{fromFile: map[string]string{}}
	fs := newFlagSet(o)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.version || o.configFile == "" {
		return o, nil
	}
	return o, o.applyFile(fs)
}

// applyFile sets, from the --config file, the flags the command line did
// not give. The file's values go through the flags' own parsing and
// finish's checks, as if typed.
func (o *options) applyFile(fs *flag.FlagSet) error {
	f, err := kubeletconfig.Load(o.configFile)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	given := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { given[canonical(fl.Name)] = true })
	for _, s := range f.Settings() {
		name := canonical(s.Flag)
		if given[name] {
			continue
		}
		if err := fs.Set(name, s.Value); err != nil {
			return fmt.Errorf("--config %s: field %s: %w", f.Path, s.Field, err)
		}
		o.fromFile[name] = s.Field
	}
	o.ignored = f.Ignored
	return nil
}

// bad names the flag of a refused value, and the file's field when the
// value came from --config.
func (o *options) bad(flag string, err error) error {
	if field, ok := o.fromFile[flag]; ok {
		return fmt.Errorf("--config %s: field %s (--%s): %w", o.configFile, field, flag, err)
	}
	return fmt.Errorf("--%s: %w", flag, err)
}

// finish checks the values and completes o.cfg and the log level.
func (o *options) finish() (slog.Level, error) {
	var level slog.Level
	creds := &o.cfg.Credentials
	if creds.Kubeconfig == "" {
		return level, errors.New("--kubeconfig is required")
	}
	bootstrapping := creds.BootstrapKubeconfig != ""
	creds.RotateCertificates = o.rotateCertificates.or(bootstrapping)
	creds.ServerTLSBootstrap = o.rotateServerCertificates.or(bootstrapping && o.cfg.TLSCertFile == "")
	creds.KubeAPIQPS, creds.KubeAPIBurst = float32(o.apiQPS), o.apiBurst
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return level, o.bad("log-level", err)
	}
	for _, c := range o.checks() {
		if err := c.check(); err != nil {
			return level, o.bad(c.flag, err)
		}
	}
	o.cfg.CNIBinDirs = filepath.SplitList(o.cniBinDirs)
	return level, nil
}

type check struct {
	flag  string
	check func() error
}

// checks parse or check one flag each, in the order of the help.
func (o *options) checks() []check {
	cfg := &o.cfg
	var err error
	// The eviction flags are parsed one by one, then combined.
	var hard, soft []eviction.Threshold
	var grace map[eviction.Signal]time.Duration
	var reclaim map[eviction.Signal]eviction.Value
	return []check{
		{"containerd-address", func() error { cfg.ContainerdAddress, err = parseRuntimeEndpoint(cfg.ContainerdAddress); return err }},
		{"cgroup-driver", func() error { return checkCgroupDriver(cfg.CgroupDriver) }},
		{"pod-cidr", func() error { return checkCIDR(cfg.PodCIDR) }},
		{"cluster-dns", func() error { cfg.ClusterDNS, err = parseIPs(o.clusterDNS); return err }},
		{"resolv-conf", func() error { return checkReadable(cfg.ResolvConf) }},
		{"system-reserved", func() error { cfg.SystemReserved, err = parseResourceList(o.systemReserved); return err }},
		{"kube-reserved", func() error { cfg.KubeReserved, err = parseResourceList(o.kubeReserved); return err }},
		{"max-pods", func() error { return atLeast(cfg.MaxPods, 1) }},
		{"oom-score-adj", func() error {
			if o.oomScoreAdj < -1000 || o.oomScoreAdj > 1000 {
				return fmt.Errorf("%d is not within [-1000, 1000]", o.oomScoreAdj)
			}
			cfg.OOMScoreAdj = &o.oomScoreAdj
			return nil
		}},
		{"pod-max-pids", func() error {
			if cfg.PodPidsLimit < -1 {
				return fmt.Errorf("%d is less than -1", cfg.PodPidsLimit)
			}
			return nil
		}},
		{"allowed-unsafe-sysctls", func() error {
			cfg.AllowedUnsafeSysctls, err = parseSysctlPatterns(o.allowedUnsafeSysctls)
			return err
		}},
		{"node-labels", func() error { cfg.NodeLabels, err = parseLabels(o.nodeLabels); return err }},
		{"register-with-taints", func() error { cfg.RegisterWithTaints, err = parseTaints(o.taints); return err }},
		{"runtime-handlers", func() error {
			cfg.RuntimeHandlers, err = parseRuntimeHandlers(o.runtimeHandlers, cfg.RuntimeBinary)
			return err
		}},
		{"kube-api-qps", func() error { return positive(o.apiQPS) }},
		{"kube-api-burst", func() error { return atLeast(o.apiBurst, 1) }},
		{"address", func() error { return checkIP(cfg.Address) }},
		{"port", func() error { return checkPort(max(cfg.Port, 0), 0) }}, // < 0 disables, 0 defaults
		{"authorization-mode", func() error { return checkAuthorizationMode(cfg.Access.AuthorizationMode) }},
		{"authentication-token-webhook-cache-ttl", func() error { return notNegative(int64(cfg.Access.WebhookCacheTTL)) }},
		{"authorization-webhook-cache-authorized-ttl", func() error { return notNegative(int64(cfg.Access.AuthorizedTTL)) }},
		{"authorization-webhook-cache-unauthorized-ttl", func() error { return notNegative(int64(cfg.Access.UnauthorizedTTL)) }},
		{"healthz-bind-address", func() error { return checkIP(cfg.HealthzBindAddress) }},
		{"healthz-port", func() error { cfg.HealthzPort, err = healthzPort(o.healthzPort); return err }},
		{"max-parallel-image-pulls", func() error { cfg.MaxParallelImagePulls, err = o.parallelPulls(); return err }},
		{"eviction-hard", func() error { hard, err = eviction.ParseStatements(o.evictionHard); return err }},
		{"eviction-soft", func() error { soft, err = eviction.ParseStatements(o.evictionSoft); return err }},
		{"eviction-soft-grace-period", func() error { grace, err = eviction.ParseGracePeriods(o.evictionSoftGrace); return err }},
		{"eviction-minimum-reclaim", func() error { reclaim, err = eviction.ParseMinimumReclaims(o.evictionMinReclaim); return err }},
		{"eviction-soft", func() error { cfg.EvictionThresholds, err = eviction.Combine(hard, soft, grace, reclaim); return err }},
		{"eviction-pressure-transition-period", func() error { return notNegative(int64(cfg.EvictionPressureTransitionPeriod)) }},
		{"eviction-max-pod-grace-period", func() error {
			cfg.EvictionMaxPodGracePeriod = int64(o.evictionMaxPodGrace)
			return notNegative(cfg.EvictionMaxPodGracePeriod)
		}},
		{"container-log-max-size", func() error { cfg.ContainerLogMaxSize, err = parseLogMaxSize(o.containerLogMaxSize); return err }},
		{"container-log-max-files", func() error { return atLeast(cfg.ContainerLogMaxFiles, 2) }},
	}
}

// optionalBool is a boolean flag that knows whether it was given, for a
// default that depends on other flags.
type optionalBool struct{ set, value bool }

func (b *optionalBool) String() string {
	if b == nil {
		return "false"
	}
	return strconv.FormatBool(b.value)
}

func (b *optionalBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	b.set, b.value = true, v
	return nil
}

func (b *optionalBool) IsBoolFlag() bool { return true }

// or is the value given, else def.
func (b *optionalBool) or(def bool) bool {
	if b.set {
		return b.value
	}
	return def
}

// parallelPulls is containerd.RegistryConfig's MaxParallelPulls from the
// two pull flags, as kubelet's: a limit needs serializeImagePulls off.
func (o *options) parallelPulls() (int, error) {
	switch {
	case o.maxPulls < 0:
		return 0, fmt.Errorf("%d is negative", o.maxPulls)
	case o.serializePulls && o.maxPulls > 1:
		return 0, fmt.Errorf("%d needs --serialize-image-pulls=false", o.maxPulls)
	case o.serializePulls:
		return 0, nil // one at a time
	case o.maxPulls == 0:
		return -1, nil // no limit
	}
	return o.maxPulls, nil
}

// checkAuthorizationMode accepts upstream kubelet's two modes.
func checkAuthorizationMode(mode string) error {
	switch mode {
	case nodeapi.AuthorizationModeWebhook, nodeapi.AuthorizationModeAlwaysAllow:
		return nil
	}
	return fmt.Errorf("%q is not %s or %s", mode, nodeapi.AuthorizationModeWebhook, nodeapi.AuthorizationModeAlwaysAllow)
}

// healthzPort is nodelet.Config's HealthzPort: 0 (off, as kubelet's
// flag) becomes -1.
func healthzPort(p int) (int, error) {
	if p == 0 {
		return -1, nil
	}
	return p, checkPort(p, 1)
}

func parseIPs(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	ips := strings.Split(s, ",")
	for _, ip := range ips {
		if err := checkIP(ip); err != nil {
			return nil, err
		}
	}
	return ips, nil
}

func checkCIDR(s string) error {
	if s == "" {
		return nil
	}
	if _, _, err := net.ParseCIDR(s); err != nil {
		return fmt.Errorf("%q is not a CIDR", s)
	}
	return nil
}

func checkReadable(path string) error {
	if path == "" {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return f.Close()
}

func checkCgroupDriver(s string) error {
	if s != "" && s != "cgroupfs" && s != "systemd" {
		return fmt.Errorf("%q is not cgroupfs or systemd", s)
	}
	return nil
}

func notNegative(n int64) error {
	if n < 0 {
		return fmt.Errorf("%d is negative", n)
	}
	return nil
}

func positive(f float64) error {
	if f <= 0 {
		return fmt.Errorf("%v is not positive", f)
	}
	return nil
}

func atLeast(n, min int) error {
	if n < min {
		return fmt.Errorf("%d is less than %d", n, min)
	}
	return nil
}
