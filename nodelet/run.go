package nodelet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"

	"k8s.io/client-go/tools/cache"

	"github.com/nodelet/nodelet/localpath"
	"github.com/nodelet/nodelet/peerroutes"
	"github.com/nodelet/nodelet/stats"
)

// Run runs the node agent until ctx ends. On the way out it stops its
// loops and the pod workers without killing any pod. It first takes the
// instance locks: a second nodelet on the same root directory or
// containerd namespace fails with ErrLocked having touched nothing.
//
// Start-up is a straight line: locks, the API client (bootstrapping the
// node's certificate first when asked), healthz listener, components
// (setup), wiring (wire), the loops that need no pod CIDR (startBase),
// then the pod CIDR, the CNI config and synced informers, then the loops
// that run pods and Services (startPods).
func (a *Agent) Run(ctx context.Context) error {
	locks, err := lockInstance(a.cfg)
	if err != nil {
		return fmt.Errorf("nodelet: %w", err)
	}
	defer locks.Release()
	stopCredentials, err := a.connect(ctx)
	if err != nil {
		return nilIfDone(ctx, err)
	}
	defer stopCredentials()
	hz, err := a.listenHealthz()
	if err != nil {
		return err
	}
	if hz != nil {
		defer hz.Close() // Serve closes it too; this covers a failed start
	}
	c, err := a.setup(ctx)
	if err != nil {
		return err
	}
	defer c.rt.Close()
	w, err := a.wire(ctx, c)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	l := &loops{ctx: ctx, log: a.log}
	defer func() {
		cancel()
		w.workers.Shutdown() // never kills pods
		w.probes.Stop()
		l.wg.Wait()
		a.log.Info("nodelet stopped")
	}()
	started := make(chan struct{}) // closed once the node can run pods
	if err := a.startBase(l, w, hz, started); err != nil {
		return err
	}
	cidr, err := a.waitPodCIDR(ctx, w)
	if err != nil {
		return nilIfDone(ctx, err)
	}
	close(started)
	a.startPods(l, w, cidr)
	<-ctx.Done()
	return nil
}

// loops runs the agent's goroutines until ctx ends; Run waits for them.
type loops struct {
	ctx context.Context
	log *slog.Logger
	wg  sync.WaitGroup
}

// run starts f; an error before ctx ends is logged.
func (l *loops) run(name string, f func(context.Context) error) {
	l.wg.Go(func() {
		if err := f(l.ctx); err != nil && l.ctx.Err() == nil {
			l.log.Error("loop ended", "loop", name, "err", err)
		}
	})
}

// startBase starts what runs before the node has a pod CIDR: the status
// writers, the runtime's events and the PLEG, the CSI driver
// registration (node plugins are pods on the host network), the container logger, the
// health endpoint, the API (a port in use fails the start) and systemd's
// conversation.
func (a *Agent) startBase(l *loops, w *wired, hz net.Listener, started <-chan struct{}) error {
	l.run("status", w.status.Run)
	l.run("nodestatus", w.node.Run)
	l.run("runtime events", func(ctx context.Context) error { a.forwardEvents(ctx, w.rt, w.hints); return nil })
	l.run("pleg", w.pleg.Run)
	l.run("csi registration", w.csi.Run)
	if a.logs != nil {
		l.run("container logger", a.logs.Run)
	}
	if w.logDrops != nil {
		l.run("container log drops", w.logDrops.Run)
	}
	if hz != nil {
		h := healthzHandler(loopsHealthy(w.pleg, w.rt))
		l.run("healthz", func(ctx context.Context) error { return serveHealthz(ctx, hz, h, a.log) })
	}
	if a.cfg.Port > 0 {
		collector, err := stats.New(stats.Config{NodeName: a.cfg.NodeName, Runtime: w.rt, Log: a.log.With("component", "stats"),
			Volumes: w.vols, VolumeInterval: a.cfg.VolumeStatsAggPeriod, VolumeMetrics: a.metrics})
		if err != nil {
			return fmt.Errorf("nodelet: %w", err)
		}
		l.run("stats", collector.Run)
		api, err := a.apiServer(w, collector)
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(a.cfg.Address, strconv.Itoa(a.cfg.Port)))
		if err != nil {
			return fmt.Errorf("nodelet: API: %w", err)
		}
		l.run("api", func(ctx context.Context) error { return api.Serve(ctx, ln) })
		if w.serving != nil {
			l.run("serving certificate", w.serving.Run)
		}
	}
	if a.cfg.Notifier != nil {
		l.run("systemd", a.notifySystemd(started, w))
	}
	return nil
}

// waitPodCIDR waits for the node's pod CIDR, writes the CNI config for it
// and waits for the pod and Service informers.
func (a *Agent) waitPodCIDR(ctx context.Context, w *wired) (string, error) {
	cidr, err := w.node.WaitPodCIDR(ctx)
	if err != nil {
		return "", err
	}
	if err := w.net.EnsureConfig(cidr); err != nil {
		return "", fmt.Errorf("nodelet: CNI config for %s: %w", cidr, err)
	}
	w.node.UpdateNow()
	w.factory.Start(ctx.Done())
	w.svcFactory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), w.pods.HasSynced, w.services.HasSynced) {
		return "", errors.New("nodelet: pod informer did not sync")
	}
	a.log.Info("nodelet running", "podCIDR", cidr)
	return cidr, nil
}

// startPods starts what runs pods and Services once the node has its pod
// CIDR: pod events, housekeeping, eviction, routes to the other nodes,
// the cluster DNS (with --cluster-dns) and the Service proxy.
func (a *Agent) startPods(l *loops, w *wired, cidr string) {
	nodeIP := w.node.Host().InternalIP
	l.run("pod events", func(ctx context.Context) error { a.podEvents(ctx, w); return nil })
	l.run("housekeeping", func(ctx context.Context) error { a.housekeeping(ctx, w); return nil })
	l.run("eviction", w.evict.Run)
	l.run("local-path cleanup", func(ctx context.Context) error {
		return localpath.Run(ctx, localpath.Config{Client: a.client, NodeName: a.cfg.NodeName, Dir: a.cfg.LocalPathDir,
			Log: a.log.With("component", "local-path")})
	})
	l.run("routes", func(ctx context.Context) error {
		return peerroutes.Run(ctx, peerroutes.Config{Client: a.client, NodeName: a.cfg.NodeName,
			PodCIDR: cidr, NodeIP: nodeIP, Log: a.log.With("component", "routes")})
	})
	if len(a.cfg.ClusterDNS) > 0 { // --cluster-dns: this node serves the cluster DNS (clusterdns.go)
		l.run("cluster dns", func(ctx context.Context) error { return a.runClusterDNS(ctx, w.svcFactory) })
	}
	l.run("service proxy", func(ctx context.Context) error {
		return a.runServiceProxy(ctx, w.svcFactory, cidr, nodeIP)
	})
}

func nilIfDone(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}
