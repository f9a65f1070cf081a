package nodelet

import (
	"context"
	"fmt"
	"net/netip"

	"k8s.io/client-go/informers"

	"github.com/nodelet/nodelet/proxy"
)

// runServiceProxy runs the Service data plane (package proxy) for this
// node: nft rules for every Service's ClusterIPs, NodePorts and external
// IPs, except the cluster DNS addresses, which the nodelet serves itself.
func (a *Agent) runServiceProxy(ctx context.Context, svcs informers.SharedInformerFactory, podCIDR, nodeIP string) error {
	cidr, err := netip.ParsePrefix(podCIDR)
	if err != nil {
		return fmt.Errorf("proxy: pod CIDR %q: %w", podCIDR, err)
	}
	ip, err := netip.ParseAddr(nodeIP)
	if err != nil {
		return fmt.Errorf("proxy: node IP %q: %w", nodeIP, err)
	}
	var skip []netip.Addr
	for _, s := range a.cfg.ClusterDNS {
		if dns, err := netip.ParseAddr(s); err == nil {
			skip = append(skip, dns.Unmap())
		}
	}
	return proxy.Run(ctx, proxy.Config{Client: a.client, Informers: svcs, NodeName: a.cfg.NodeName, NodeIP: ip.Unmap(),
		PodCIDR: cidr.Masked(), SkipClusterIPs: skip, Log: a.log.With("component", "proxy")})
}
