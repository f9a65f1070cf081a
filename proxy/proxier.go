package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Defaults of Config.
const (
	DefaultMinSyncPeriod = 100 * time.Millisecond
	DefaultResyncPeriod  = 30 * time.Second
	retryPeriod          = 5 * time.Second
)

// labelServiceProxyName: services naming another proxy are not ours
// (upstream's rule).
const labelServiceProxyName = "service.kubernetes.io/service-proxy-name"

// Config is what the proxy needs of the node.
type Config struct {
	// Client watches the node's own Node; Informers is the node's shared
	// factory of Services and EndpointSlices (the cluster DNS and the
	// pods' environment use it too: one watch of each per node), started
	// and shut down by its owner.
	Client    kubernetes.Interface
	Informers informers.SharedInformerFactory
	NodeName  string
	// NodeIP is the node's InternalIP: a NodePort address and the source
	// of the ClusterIP routes (see Executor). The Node's other addresses
	// (status.addresses InternalIP/ExternalIP) are NodePort addresses too.
	NodeIP  netip.Addr
	PodCIDR netip.Prefix
	// SkipClusterIPs get no rule at all: the cluster DNS addresses
	// (--cluster-dns), served on each node by the nodelet itself.
	SkipClusterIPs []netip.Addr
	// MinSyncPeriod spaces syncs (changes in between are coalesced into
	// the next one); ResyncPeriod re-applies without a change.
	MinSyncPeriod, ResyncPeriod time.Duration
	// NetNSPath: the namespace to write into ("" = the caller's).
	NetNSPath string
	Log       *slog.Logger
	// ObserveSync, optional, is told each sync's duration and result.
	ObserveSync func(d time.Duration, err error)
}

// Run keeps the services table in step with the API until ctx ends. It
// does not remove the table on the way out: a restarted nodelet finds
// the rules in place (established connections keep their conntrack
// entries) and its first sync replaces them atomically. Cleanup removes
// them for uninstall.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.MinSyncPeriod <= 0 {
		cfg.MinSyncPeriod = DefaultMinSyncPeriod
	}
	if cfg.ResyncPeriod <= 0 {
		cfg.ResyncPeriod = DefaultResyncPeriod
	}
	if !cfg.PodCIDR.IsValid() {
		return errors.New("proxy: no pod CIDR")
	}
	exec, err := NewExecutor(cfg.NetNSPath, cfg.Log)
	if err != nil {
		return err
	}
	defer exec.Close()
	if cfg.NetNSPath == "" {
		ensureBridgeNetfilter(cfg.PodCIDR.Addr().Is6(), cfg.Log)
	}

	kick := make(chan struct{}, 1)
	wake := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { wake() },
		UpdateFunc: func(any, any) { wake() },
		DeleteFunc: func(any) { wake() },
	}
	factory := cfg.Informers
	svcs := factory.Core().V1().Services()
	eps := factory.Discovery().V1().EndpointSlices()
	// The informers are shared: the handlers go when the proxy does.
	for _, inf := range []cache.SharedIndexInformer{svcs.Informer(), eps.Informer()} {
		reg, err := inf.AddEventHandler(handler)
		if err != nil {
			return fmt.Errorf("proxy: watch services: %w", err)
		}
		defer inf.RemoveEventHandler(reg)
	}
	nodeFactory := informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", cfg.NodeName).String()
		}))
	nodes := nodeFactory.Core().V1().Nodes()
	nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { wake() },
		UpdateFunc: func(o, n any) {
			on, ok1 := o.(*corev1.Node)
			nn, ok2 := n.(*corev1.Node)
			if !ok1 || !ok2 || fmt.Sprint(on.Status.Addresses) != fmt.Sprint(nn.Status.Addresses) {
				wake()
			}
		},
	})
	factory.Start(ctx.Done())
	nodeFactory.Start(ctx.Done())
	defer nodeFactory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), svcs.Informer().HasSynced, eps.Informer().HasSynced, nodes.Informer().HasSynced) {
		return nil // ctx ended
	}
	inputs := func() ([]*corev1.Service, []*discoveryv1.EndpointSlice, Options) {
		all, _ := svcs.Lister().List(labels.Everything())
		var mine []*corev1.Service
		for _, s := range all {
			if s.Labels[labelServiceProxyName] == "" {
				mine = append(mine, s)
			}
		}
		slices, _ := eps.Lister().List(labels.Everything())
		o := Options{NodeName: cfg.NodeName, PodCIDR: cfg.PodCIDR, SkipClusterIPs: cfg.SkipClusterIPs,
			Is6: cfg.PodCIDR.Addr().Is6(), NodeIPs: []netip.Addr{cfg.NodeIP}}
		if n, err := nodes.Lister().Get(cfg.NodeName); err == nil {
			o.NodeIPs = append(o.NodeIPs, nodeAddresses(n)...)
		}
		return mine, slices, o
	}
	s := &syncer{exec: exec, cfg: cfg, last: [3]int{-1, -1, -1}}
	s.loop(ctx, kick, inputs)
	return nil
}

// nodeAddresses are a Node's InternalIP and ExternalIP addresses.
func nodeAddresses(n *corev1.Node) []netip.Addr {
	var out []netip.Addr
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
			continue
		}
		if ip, err := netip.ParseAddr(a.Address); err == nil {
			out = append(out, ip.Unmap())
		}
	}
	return out
}

// applier is what the loop needs of the Executor.
type applier interface {
	Apply(p Plan, routeSrc netip.Addr) error
}

type syncer struct {
	exec applier
	cfg  Config
	last [3]int // rules, targets, endpoints of the last sync logged at Info
}

// loop syncs at once, then after each kick (no sooner than MinSyncPeriod
// after the previous sync: kicks in between collapse into one), every
// ResyncPeriod, and retryPeriod after a failure.
func (s *syncer) loop(ctx context.Context, kick <-chan struct{}, inputs func() ([]*corev1.Service, []*discoveryv1.EndpointSlice, Options)) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
		case <-timer.C:
		}
		start := time.Now()
		svcs, eps, o := inputs()
		p := Compute(svcs, eps, o)
		err := s.exec.Apply(p, s.cfg.NodeIP)
		d := time.Since(start)
		if s.cfg.ObserveSync != nil {
			s.cfg.ObserveSync(d, err)
		}
		next := s.cfg.ResyncPeriod
		if err != nil {
			s.cfg.Log.Error("sync services", "err", err)
			next = retryPeriod
		} else {
			eps := 0
			for _, tg := range p.Targets {
				eps += len(tg.Endpoints)
			}
			// Info when the shape changed (first sync included), else Debug.
			level, summary := slog.LevelDebug, [3]int{len(p.Rules), len(p.Targets), eps}
			if summary != s.last {
				level, s.last = slog.LevelInfo, summary
			}
			s.cfg.Log.Log(ctx, level, "services synced", "rules", len(p.Rules), "targets", len(p.Targets), "endpoints", eps, "took", d)
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(next)
		// Coalesce: changes during the pause wait in kick (size 1).
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.cfg.MinSyncPeriod - min(d, s.cfg.MinSyncPeriod)):
		}
	}
}

// ensureBridgeNetfilter turns on net.bridge.bridge-nf-call-ip(6)tables
// (the nft ip/ip6 hooks for bridged packets too): without it, the reply
// of a pod to another pod on the same bridge that reached it through a
// ClusterIP is bridged straight back, never un-DNATed, and the client
// drops it. Upstream kube-proxy requires the same (and warns).
func ensureBridgeNetfilter(is6 bool, log *slog.Logger) {
	path := "/proc/sys/net/bridge/bridge-nf-call-iptables"
	if is6 {
		path = "/proc/sys/net/bridge/bridge-nf-call-ip6tables"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		log.Warn("br_netfilter is not loaded: pods reaching a service endpoint on their own node will fail", "err", err)
		return
	}
	if strings.TrimSpace(string(b)) == "1" {
		return
	}
	if err := os.WriteFile(path, []byte("1"), 0o644); err != nil {
		log.Warn("cannot enable bridge netfilter: pods reaching a service endpoint on their own node will fail", "path", path, "err", err)
		return
	}
	log.Info("enabled bridge netfilter for services", "path", path)
}
