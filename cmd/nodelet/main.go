// Command nodelet is the node agent: it runs the pods the API server
// assigns to its node on containerd.
//
//	nodelet --kubeconfig FILE [--config KUBELET-CONFIG-FILE] [flags]
//	nodelet --version
//	nodelet cleanup-network    (uninstall: routes to other nodes, masquerade rule, service rules, cluster DNS addresses)
//	nodelet bootstrap-kubeconfig --server HOST:PORT --token ID.SECRET --discovery-token-ca-cert-hash sha256:HEX --out FILE
//	                           (kubeadm's token discovery: the kubeconfig --bootstrap-kubeconfig reads)
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

	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/buildinfo"
	"github.com/nodelet/nodelet/clusterdns"
	"github.com/nodelet/nodelet/network"
	"github.com/nodelet/nodelet/nodelet"
	"github.com/nodelet/nodelet/proxy"
	"github.com/nodelet/nodelet/sdnotify"
)

func main() {
	if os.Getenv("GOGC") == "" {
		// A node agent lives next to the workloads: trade a little CPU for
		// a smaller heap (measured: RSS -10 MB idle, see docs/benchmarks.md).
		debug.SetGCPercent(50)
	}
	run := run
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "cleanup-network":
			run, os.Args = cleanupNetwork, os.Args[1:]
		case "bootstrap-kubeconfig":
			run, os.Args = bootstrapKubeconfig, os.Args[1:]
		}
	}
	if err := run(os.Args[1:]); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "nodelet:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	o, err := parseOptions(args)
	if err != nil {
		return err
	}
	if o.version {
		fmt.Println(buildinfo.String("nodelet"))
		return nil
	}
	level, err := o.finish()
	if err != nil {
		return err
	}
	log := newLogger(level)
	slog.SetDefault(log)
	klog.SetSlogLogger(log)
	for _, field := range o.ignored {
		log.Warn("kubelet config field not supported by the nodelet yet; ignored", "file", o.configFile, "field", field)
	}
	cfg := o.cfg
	cfg.Log = log
	// READY=1 and watchdog pings when systemd runs the nodelet
	// (Type=notify); without NOTIFY_SOCKET it sends nothing.
	cfg.Notifier = sdnotify.New(sdnotify.Config{Log: log, ReadyStatus: "node " + cfg.NodeName + " running"})
	// One process for the node writes the containers' logs and outlives
	// the nodelet (see containerlogs).
	logger, err := loggerBinary()
	if err != nil {
		return err
	}
	cfg.LoggerCommand = []string{logger}
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

// cleanupNetwork removes what the nodelet added to the host's network
// outside the pods: its routes to other nodes' pod CIDRs, its
// masquerade rule, the Service proxy's table and ClusterIP routes, and the
// cluster DNS addresses (clusterdns.RemoveAddresses). For uninstalling; a
// running nodelet would put them back.
func cleanupNetwork(args []string) error {
	fs := flag.NewFlagSet("nodelet cleanup-network", flag.ContinueOnError)
	if err := fs.Parse(args); err != nil {
		return err
	}
	return errors.Join(network.Cleanup(""), proxy.Cleanup(""), clusterdns.RemoveAddresses())
}

// loggerBinary finds nodelet-logger (cmd/nodelet-logger) next to this
// executable, else where the package installs it.
func loggerBinary() (string, error) {
	var tried []string
	if exe, err := os.Executable(); err == nil {
		tried = append(tried, filepath.Join(filepath.Dir(exe), "nodelet-logger"))
	}
	tried = append(tried, "/usr/lib/nodelet/nodelet-logger")
	for _, p := range tried {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", fmt.Errorf("the container logger is missing: none of %s exists (build cmd/nodelet-logger)", strings.Join(tried, ", "))
}
