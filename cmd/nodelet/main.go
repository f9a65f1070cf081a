// Command nodelet is the node agent: it runs the pods the API server
// assigns to its node on containerd.
//
//	nodelet --kubeconfig FILE [--config KUBELET-CONFIG-FILE] [flags]
//	nodelet --version
//	nodelet cleanup-network    (uninstall: routes to other nodes, masquerade rule)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/buildinfo"
	"github.com/nodelet/nodelet/network"
	"github.com/nodelet/nodelet/nodelet"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/sdnotify"
)

func main() {
	// The containerd shim starts this binary as the containers' log driver.
	if runtime.IsLogDriver(os.Args[1:]) {
		runtime.RunLogDriver(os.Args[1:])
		return
	}
	if os.Getenv("GOGC") == "" {
		// A node agent lives next to the workloads: trade a little CPU for
		// a smaller heap (measured: RSS -10 MB idle, see docs/benchmarks.md).
		debug.SetGCPercent(50)
	}
	run := run
	if len(os.Args) > 1 && os.Args[1] == "cleanup-network" {
		run, os.Args = cleanupNetwork, os.Args[1:]
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
	rc, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig %s: %w", o.kubeconfig, err)
	}
	rc.QPS, rc.Burst = float32(o.apiQPS), o.apiBurst
	rc.UserAgent = "nodelet/" + cfg.NodeName
	cfg.RestConfig, cfg.Log = rc, log
	// READY=1 and watchdog pings when systemd runs the nodelet
	// (Type=notify); without NOTIFY_SOCKET it sends nothing.
	cfg.Notifier = sdnotify.New(sdnotify.Config{Log: log, ReadyStatus: "node " + cfg.NodeName + " running"})
	if exe, err := os.Executable(); err == nil {
		cfg.LogDriver = exe // container logs survive nodelet restarts
	}
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
// outside the pods: its routes to other nodes' pod CIDRs and its
// masquerade rule. For uninstalling; a running nodelet would put them back.
func cleanupNetwork(args []string) error {
	fs := flag.NewFlagSet("nodelet cleanup-network", flag.ContinueOnError)
	if err := fs.Parse(args); err != nil {
		return err
	}
	return network.Cleanup("")
}
