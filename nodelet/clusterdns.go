package nodelet

import (
	"context"
	"time"

	"k8s.io/client-go/informers"

	"github.com/nodelet/nodelet/clusterdns"
)

// clusterDNSRetry is the wait before serving the cluster DNS again after a
// failure (an address or port not available yet).
const clusterDNSRetry = 5 * time.Second

// runClusterDNS serves the cluster DNS (package clusterdns) on the
// ClusterDNS IPs of this node until ctx ends, starting again after a
// failure. The IPs stay on the node's nodelet-dns interface when it
// stops, so a restarted nodelet serves at once; `nodelet cleanup-network`
// removes them.
func (a *Agent) runClusterDNS(ctx context.Context, svcs informers.SharedInformerFactory) error {
	log := a.log.With("component", "clusterdns")
	for {
		err := clusterdns.Run(ctx, clusterdns.RunConfig{Informers: svcs, ClusterDNS: a.cfg.ClusterDNS,
			Domain: a.cfg.ClusterDomain, ResolvConf: a.cfg.ResolvConf, Log: log})
		if ctx.Err() != nil {
			return nil
		}
		log.Error("cluster DNS stopped; starting again", "err", err, "after", clusterDNSRetry)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(clusterDNSRetry):
		}
	}
}
