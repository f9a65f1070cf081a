// Command nodelet-logger is the node's container logger (package
// containerlogs): it writes every container's stdout and stderr into
// rotated CRI log files. The nodelet starts it when none answers on DIR's
// socket; it outlives the nodelet and ends once nothing is logged and no
// nodelet is connected. A program of its own, not a nodelet subcommand, so
// that it does not carry the nodelet's memory (client-go, gRPC) beside
// the pods: measured in docs/benchmarks.md.
//
//	nodelet-logger --dir DIR
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

	"github.com/nodelet/nodelet/containerlogs"
)

func main() {
	if err := run(os.Args[1:]); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "nodelet-logger:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("nodelet-logger", flag.ContinueOnError)
	dir := fs.String("dir", "", "the logger's directory: socket, registrations, FIFOs (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(25) // a small heap beside the pods; copying is cheap
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("pid", os.Getpid())
	l, err := containerlogs.New(containerlogs.Config{Dir: *dir, IdleExit: true, Log: log})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := l.Run(ctx); errors.Is(err, containerlogs.ErrRunning) {
		log.Info("another container logger serves this directory; exiting", "dir", *dir)
		return nil
	}
	return err
}
