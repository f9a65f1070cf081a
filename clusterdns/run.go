package clusterdns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strconv"
	"time"

	"k8s.io/client-go/informers"
)

// resolvConfRecheck is how often the node's resolv.conf is read again
// (DHCP or systemd-resolved may change it) and the addresses checked.
const resolvConfRecheck = 30 * time.Second

// RunConfig is the node's cluster DNS.
type RunConfig struct {
	// Informers is the node's shared factory (Services, EndpointSlices);
	// its owner starts and shuts it down.
	Informers informers.SharedInformerFactory
	// ClusterDNS are the IPs served (--cluster-dns); Domain the cluster
	// domain (--cluster-domain).
	ClusterDNS []string
	Domain     string
	// ResolvConf names the node's resolvers (--resolv-conf; default
	// /etc/resolv.conf). A loopback resolver (127.0.0.53) is fine: the
	// nodelet forwards from the host's side.
	ResolvConf string
	// Port is 53 when 0 (tests).
	Port int
	// KeepAddresses leaves the addresses alone (tests that listen on
	// loopback); otherwise EnsureAddresses makes the IPs local.
	KeepAddresses bool
	Log           *slog.Logger
}

// Run makes the cluster DNS IPs local, syncs the informers, then serves
// on every IP until ctx ends. The addresses stay when it returns, so that
// a restarted nodelet serves again at once; `nodelet cleanup-network`
// removes them (RemoveAddresses).
func Run(ctx context.Context, cfg RunConfig) error {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Port == 0 {
		cfg.Port = 53
	}
	if cfg.ResolvConf == "" {
		cfg.ResolvConf = "/etc/resolv.conf"
	}
	var ips []netip.Addr
	for _, s := range cfg.ClusterDNS {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			return fmt.Errorf("clusterdns: cluster DNS IP %q: %w", s, err)
		}
		ips = append(ips, ip)
	}
	if len(ips) == 0 {
		return errors.New("clusterdns: no cluster DNS IP")
	}
	if !cfg.KeepAddresses {
		link, err := EnsureAddresses(ips)
		if err != nil {
			return err
		}
		cfg.Log.Info("cluster DNS addresses", "interface", link, "ips", cfg.ClusterDNS)
	}
	src, err := NewInformerSource(cfg.Informers)
	if err != nil {
		return err
	}
	if !src.Start(ctx) {
		return nil
	}
	conf, _ := os.ReadFile(cfg.ResolvConf) // missing: no upstreams
	srv, err := New(Config{Domain: cfg.Domain, Source: src, Upstreams: Upstreams(conf, ips), Log: cfg.Log})
	if err != nil {
		return err
	}
	var addrs []string
	for _, ip := range ips {
		addrs = append(addrs, net.JoinHostPort(ip.String(), strconv.Itoa(cfg.Port)))
	}
	pcs, lns, err := Listen(addrs)
	if err != nil {
		return err
	}
	cfg.Log.Info("serving cluster DNS", "addresses", addrs, "domain", cfg.Domain, "upstreams", Upstreams(conf, ips))
	go maintain(ctx, cfg, conf, ips, srv)
	return srv.Serve(ctx, pcs, lns)
}

// maintain re-checks every resolvConfRecheck: the server gets the
// resolvers again when the file changed, and addresses someone removed
// are put back.
func maintain(ctx context.Context, cfg RunConfig, last []byte, self []netip.Addr, srv *Server) {
	t := time.NewTicker(resolvConfRecheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !cfg.KeepAddresses {
			if _, err := EnsureAddresses(self); err != nil {
				cfg.Log.Error("cluster DNS addresses", "err", err)
			}
		}
		conf, _ := os.ReadFile(cfg.ResolvConf)
		if bytes.Equal(conf, last) {
			continue
		}
		last = conf
		ups := Upstreams(conf, self)
		cfg.Log.Info("cluster DNS upstreams changed", "resolvConf", cfg.ResolvConf, "upstreams", ups)
		srv.SetUpstreams(ups)
	}
}
