// Package network gives pods their network: a named network namespace per
// sandbox, CNI ADD and DEL through libcni with the standard plugins of the
// containernetworking project (bridge, host-local, portmap), a bridge
// configuration written by the nodelet when the host has none, a
// reconciliation that releases what crashed or rebooted nodelets leaked,
// and, between nodes, routes to the other nodes' pod CIDRs with one
// masquerade rule for what leaves the cluster (routes.go, masq.go).
//
// What lives where:
//
//	ConfDir/10-<NetworkName>.conflist   our generated config (marked generatedBy "nodelet")
//	NetNSDir/<sandbox id>               the pod's netns, a bind mount of nsfs (as `ip netns add`)
//	CacheDir/results/<net>-<id>-<if>    libcni's record of each ADD: config, args and result
//	IPAMDir/<net>/<ip>                  host-local reservations, each holding its sandbox id
//
// CacheDir and IPAMDir sit under the nodelet's root directory so that
// teardown works, and allocations can be reconciled, after a restart or a
// reboot. NetNSDir is normally on tmpfs and empties at reboot; teardown
// copes with a namespace that is gone.
package network

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/cni/libcni"
	cnitypes "github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
)

// Defaults for Config fields left empty.
const (
	DefaultConfDir     = "/etc/cni/net.d"
	DefaultCacheDir    = "/var/lib/nodelet/cni/cache"
	DefaultIPAMDir     = "/var/lib/nodelet/cni/networks"
	DefaultNetNSDir    = "/run/nodelet/netns"
	DefaultBridgeName  = "nodelet0"
	DefaultNetworkName = "nodelet"
)

// DefaultBinDirs are searched for CNI plugins when Config.BinDirs is empty.
var DefaultBinDirs = []string{"/opt/cni/bin", "/usr/lib/cni"}

// ifName is the pod's interface, as every Kubernetes runtime names it.
const ifName = "eth0"

// reconcileGrace protects pods this process set up a moment ago from a
// Reconcile whose live set was computed before their SetupPod returned.
const reconcileGrace = 30 * time.Second

// cleanupTimeout bounds the rollback of a failed SetupPod, which runs on a
// fresh context because the caller's may be the reason for the failure.
const cleanupTimeout = time.Minute

var (
	// ErrNoConfig means the configuration directory holds no usable CNI
	// network configuration: the node's network is not ready.
	ErrNoConfig = errors.New("network: no CNI network configuration")
	// ErrInvalidID means a sandbox ID cannot name a netns or a CNI container.
	ErrInvalidID = errors.New("network: invalid sandbox id")
	// ErrInvalidPodCIDR means EnsureConfig got a podCIDR it cannot use.
	ErrInvalidPodCIDR = errors.New("network: invalid pod CIDR")
)

// Config configures a Network. Zero fields take the defaults above.
type Config struct {
	// BinDirs are searched, in order, for CNI plugin executables.
	BinDirs []string
	// ConfDir holds CNI network configurations; the first usable one in
	// lexical order is used, as containerd and the kubelet do.
	ConfDir string
	// CacheDir is libcni's cache of ADD results, used to DEL after restarts.
	CacheDir string
	// IPAMDir is host-local's dataDir in the config we generate.
	IPAMDir string
	// NetNSDir holds the pods' named network namespaces.
	NetNSDir string
	// BridgeName is the bridge of the generated config.
	BridgeName string
	// NetworkName is the network name of the generated config.
	NetworkName string
	Log         *slog.Logger
}

func (c Config) withDefaults() Config {
	if len(c.BinDirs) == 0 {
		c.BinDirs = DefaultBinDirs
	}
	if c.ConfDir == "" {
		c.ConfDir = DefaultConfDir
	}
	if c.CacheDir == "" {
		c.CacheDir = DefaultCacheDir
	}
	if c.IPAMDir == "" {
		c.IPAMDir = DefaultIPAMDir
	}
	if c.NetNSDir == "" {
		c.NetNSDir = DefaultNetNSDir
	}
	if c.BridgeName == "" {
		c.BridgeName = DefaultBridgeName
	}
	if c.NetworkName == "" {
		c.NetworkName = DefaultNetworkName
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	return c
}

// cniRunner is the part of libcni the Network uses (libcni.CNI is wider).
type cniRunner interface {
	AddNetworkList(ctx context.Context, list *libcni.NetworkConfigList, rt *libcni.RuntimeConf) (cnitypes.Result, error)
	DelNetworkList(ctx context.Context, list *libcni.NetworkConfigList, rt *libcni.RuntimeConf) error
	GetNetworkListCachedResult(list *libcni.NetworkConfigList, rt *libcni.RuntimeConf) (cnitypes.Result, error)
	GetCachedAttachments(containerID string) ([]*libcni.NetworkAttachment, error)
	ValidateNetworkList(ctx context.Context, list *libcni.NetworkConfigList) ([]string, error)
	GetVersionInfo(ctx context.Context, pluginType string) (version.PluginInfo, error)
}

// Network sets up and tears down pod networks. Its methods are safe for
// concurrent use on different sandboxes; callers serialize operations on
// one sandbox (the pod worker does).
type Network struct {
	cfg Config
	log *slog.Logger
	cni cniRunner
	now func() time.Time

	mu       sync.Mutex
	inflight map[string]int       // sandbox id -> SetupPods running
	recent   map[string]time.Time // sandbox id -> when its SetupPod succeeded
}

// New returns a Network for cfg. It touches nothing on disk.
func New(cfg Config) (*Network, error) {
	cfg = cfg.withDefaults()
	for name, dir := range map[string]string{
		"ConfDir": cfg.ConfDir, "CacheDir": cfg.CacheDir, "IPAMDir": cfg.IPAMDir, "NetNSDir": cfg.NetNSDir,
	} {
		if !filepath.IsAbs(dir) {
			return nil, fmt.Errorf("network: %s %q is not an absolute path", name, dir)
		}
	}
	if err := validateNetworkName(cfg.NetworkName); err != nil {
		return nil, err
	}
	if len(cfg.BridgeName) > 15 || strings.ContainsAny(cfg.BridgeName, "/ ") {
		return nil, fmt.Errorf("network: invalid bridge name %q", cfg.BridgeName)
	}
	return &Network{
		cfg:      cfg,
		log:      cfg.Log.With("component", "network"),
		cni:      libcni.NewCNIConfigWithCacheDir(cfg.BinDirs, cfg.CacheDir, nil),
		now:      time.Now,
		inflight: map[string]int{},
		recent:   map[string]time.Time{},
	}, nil
}

// PodNetwork names the pod whose sandbox gets (or loses) a network.
type PodNetwork struct {
	ID        string // sandbox id: names the netns and the CNI container
	Namespace string
	Name      string
	UID       string
	// PortMappings are the pod's hostPorts, handed to the portmap plugin.
	PortMappings []PortMapping
}

// PortMapping is one hostPort of a pod.
type PortMapping struct {
	HostPort      int32
	ContainerPort int32
	Protocol      string // TCP (default), UDP or SCTP
	HostIP        string // "" for all addresses
}

// Result is what SetupPod gives the sandbox.
type Result struct {
	// NetNSPath is the netns the sandbox's containers join.
	NetNSPath string
	// IP is the pod's primary address (the first IPv4 one, if any).
	IP netip.Addr
	// IPs are all the addresses CNI gave the pod's interface.
	IPs []netip.Addr
}

var idPattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$`)

func validateID(id string) error {
	if len(id) > 200 || !idPattern.MatchString(id) {
		return fmt.Errorf("%w: %q", ErrInvalidID, id)
	}
	return nil
}

func validateNetworkName(name string) error {
	if !idPattern.MatchString(name) {
		return fmt.Errorf("network: invalid network name %q", name)
	}
	return nil
}

// NetNSPath is where the netns of sandbox id lives (whether or not it exists).
func (n *Network) NetNSPath(id string) string {
	return filepath.Join(n.cfg.NetNSDir, id)
}

// Ready reports whether pods can get a network: nil once a usable CNI
// configuration exists, an error wrapping ErrNoConfig before. It feeds the
// node's Ready condition.
func (n *Network) Ready() error {
	_, err := n.loadNetworkList()
	return err
}

func (n *Network) beginSetup(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.inflight[id]++
}

func (n *Network) endSetup(id string, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.inflight[id]--; n.inflight[id] <= 0 {
		delete(n.inflight, id)
	}
	if ok {
		n.recent[id] = n.now()
	}
}

// protected reports the sandboxes Reconcile must leave alone although they
// are not live: set up right now, or a moment ago.
func (n *Network) protected() map[string]bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := n.now()
	out := make(map[string]bool, len(n.inflight)+len(n.recent))
	for id := range n.inflight {
		out[id] = true
	}
	for id, at := range n.recent {
		if now.Sub(at) > reconcileGrace {
			delete(n.recent, id)
			continue
		}
		out[id] = true
	}
	return out
}

func (n *Network) isProtected(id string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	at, ok := n.recent[id]
	return n.inflight[id] > 0 || (ok && n.now().Sub(at) <= reconcileGrace)
}

func (n *Network) forget(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.recent, id)
}
