// Package peerroutes keeps a route to every other node's pod CIDR through
// that node's InternalIP, and the node's masquerade rule (network.Routes),
// in step with the Node objects: pods on different nodes reach each other
// without an overlay. It reads Nodes and touches only the host's routes
// and its own nftables table.
package peerroutes

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/nodelet/nodelet/network"
)

// routesResync re-applies the routes and the masquerade rule although no
// Node changed, repairing what someone else removed; routesRetry is the
// wait after a failed Sync.
const (
	routesResync = 30 * time.Second
	routesRetry  = 5 * time.Second
)

// peerSyncer is what the route loop needs of network.Routes.
type peerSyncer interface {
	Sync(ctx context.Context, peers []network.Peer) error
}

// Config configures the route loop; every field but Log is required.
type Config struct {
	Client   kubernetes.Interface
	NodeName string
	// PodCIDR and NodeIP are this node's.
	PodCIDR, NodeIP string
	Log             *slog.Logger
}

// Run keeps the routes until ctx ends. Node changes that do not move an
// address or a pod CIDR (heartbeats, conditions) do not wake it.
func Run(ctx context.Context, cfg Config) error {
	podCIDR, nodeIP := cfg.PodCIDR, cfg.NodeIP
	cidr, err := netip.ParsePrefix(podCIDR)
	if err != nil {
		return fmt.Errorf("routes: pod CIDR %q: %w", podCIDR, err)
	}
	ip, err := netip.ParseAddr(nodeIP)
	if err != nil {
		return fmt.Errorf("routes: node IP %q: %w", nodeIP, err)
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	routes, err := network.NewRoutes(network.RoutesConfig{PodCIDR: cidr, NodeIP: ip, Log: log})
	if err != nil {
		return fmt.Errorf("routes: %w", err)
	}
	factory := informers.NewSharedInformerFactory(cfg.Client, 0)
	nodes := factory.Core().V1().Nodes()
	kick := make(chan struct{}, 1)
	wake := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { wake() },
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*corev1.Node)
			n, ok2 := newObj.(*corev1.Node)
			if !ok1 || !ok2 || !samePeers(peersOf([]*corev1.Node{o}, ""), peersOf([]*corev1.Node{n}, "")) {
				wake()
			}
		},
		DeleteFunc: func(any) { wake() },
	})
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), nodes.Informer().HasSynced) {
		return ctx.Err()
	}
	list := func() []*corev1.Node {
		all, _ := nodes.Lister().List(labels.Everything())
		return all
	}
	syncPeerRoutes(ctx, routes, list, cfg.NodeName, kick, log)
	return nil
}

// syncPeerRoutes applies the peers of list() at once, after each kick and
// every routesResync, until ctx ends.
func syncPeerRoutes(ctx context.Context, routes peerSyncer, list func() []*corev1.Node, self string, kick <-chan struct{}, log *slog.Logger) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
		case <-timer.C:
		}
		next := routesResync
		if err := routes.Sync(ctx, peersOf(list(), self)); err != nil && ctx.Err() == nil {
			log.Error("sync routes to other nodes", "err", err)
			next = routesRetry
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(next)
	}
}

// peersOf are the nodes other than self that have an InternalIP and a pod
// CIDR, sorted by name. A node missing either has no route yet.
func peersOf(nodes []*corev1.Node, self string) []network.Peer {
	var out []network.Peer
	for _, n := range nodes {
		if n.Name == self {
			continue
		}
		p := network.Peer{Name: n.Name}
		for _, addr := range n.Status.Addresses {
			if ip, err := netip.ParseAddr(addr.Address); addr.Type == corev1.NodeInternalIP && err == nil {
				p.IP = ip
				break
			}
		}
		cidrs := n.Spec.PodCIDRs
		if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
			cidrs = []string{n.Spec.PodCIDR}
		}
		for _, c := range cidrs {
			if prefix, err := netip.ParsePrefix(c); err == nil {
				p.PodCIDRs = append(p.PodCIDRs, prefix.Masked())
			}
		}
		if p.IP.IsValid() && len(p.PodCIDRs) > 0 {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b network.Peer) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func samePeers(a, b []network.Peer) bool {
	return slices.EqualFunc(a, b, func(x, y network.Peer) bool {
		return x.Name == y.Name && x.IP == y.IP && slices.Equal(x.PodCIDRs, y.PodCIDRs)
	})
}
