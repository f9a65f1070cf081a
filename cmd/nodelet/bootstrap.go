package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os/signal"
	"strings"
	"syscall"

	"github.com/nodelet/nodelet/nodecerts"
)

// bootstrapKubeconfig is kubeadm join's discovery as a command: it finds
// the control plane with a bootstrap token, trusts it only if its CA has
// a pinned hash, and writes the kubeconfig --bootstrap-kubeconfig reads.
//
//	nodelet bootstrap-kubeconfig --server HOST:PORT --token ID.SECRET \
//	    --discovery-token-ca-cert-hash sha256:HEX --out FILE
func bootstrapKubeconfig(args []string) error {
	fs := flag.NewFlagSet("nodelet bootstrap-kubeconfig", flag.ContinueOnError)
	var d nodecerts.Discovery
	var out, logLevel string
	fs.StringVar(&d.Server, "server", "", "API server to discover, HOST:PORT or https://HOST:PORT (required)")
	fs.StringVar(&d.Token, "token", "", "bootstrap token ID.SECRET, from `controlplane token create` (required)")
	fs.Var((*hashList)(&d.CACertHashes), "discovery-token-ca-cert-hash", "sha256:HEX of the cluster CA's public key, the second line of `controlplane token create`; "+
		"a control plane whose CA does not match is refused (repeatable)")
	fs.BoolVar(&d.UnsafeSkipCAVerification, "discovery-token-unsafe-skip-ca-verification", false, "trust whatever CA a server that knows the token presents, without a hash")
	fs.DurationVar(&d.Timeout, "discovery-timeout", nodecerts.DefaultDiscoveryTimeout, "how long to wait for the control plane to answer and to sign cluster-info with the token")
	fs.StringVar(&out, "out", "", "bootstrap kubeconfig to write, mode 0600 (required)")
	fs.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case out == "":
		return errors.New("--out is required")
	case d.Token == "":
		return errors.New("--token is required")
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	d.Log = newLogger(level)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cfg, err := d.Run(ctx)
	if err != nil {
		return err
	}
	return nodecerts.WriteKubeconfig(out, *cfg)
}

// hashList is a repeatable flag, comma-separated values accepted too.
type hashList []string

func (h *hashList) String() string { return strings.Join(*h, ",") }

func (h *hashList) Set(s string) error {
	for v := range strings.SplitSeq(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*h = append(*h, v)
		}
	}
	return nil
}
