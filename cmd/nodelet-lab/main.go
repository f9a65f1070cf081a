// Command nodelet-lab runs a multi-node cluster on this machine: the
// control plane and N nodes, each node in a network namespace of its own
// with its own containerd and nodelet (see package lab).
//
//	nodelet-lab up [--nodes N] [--name NAME] [--dir DIR] [--port PORT] [--bin-dir DIR]
//	               [--controlplane-arg ARG]... [--nodelet-arg ARG]...
//	nodelet-lab down [--name NAME] [--dir DIR]
//	nodelet-lab kill-node NODE [--name NAME] [--dir DIR]
//	nodelet-lab start-node NODE [--name NAME] [--dir DIR]
//	nodelet-lab add-node [--name NAME] [--dir DIR]
//	nodelet-lab remove-node NODE [--name NAME] [--dir DIR]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/nodelet/nodelet/lab"
)

const usage = `usage:
  nodelet-lab up [--nodes N] [--name NAME] [--dir DIR] [--port PORT] [--bin-dir DIR]
                 [--controlplane-arg ARG]... [--nodelet-arg ARG]...
  nodelet-lab down [--name NAME] [--dir DIR]
  nodelet-lab kill-node NODE [--name NAME] [--dir DIR]
  nodelet-lab start-node NODE [--name NAME] [--dir DIR]
  nodelet-lab add-node [--name NAME] [--dir DIR]
  nodelet-lab remove-node NODE [--name NAME] [--dir DIR]`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "nodelet-lab:", err)
		os.Exit(1)
	}
}

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, " ") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, usage)
		return flag.ErrHelp
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "up":
		return up(ctx, rest)
	case "down":
		cfg, _, err := parseCommon("down", rest, false)
		if err != nil {
			return err
		}
		return lab.Down(ctx, cfg)
	case "kill-node", "start-node", "remove-node":
		cfg, node, err := parseCommon(cmd, rest, true)
		if err != nil {
			return err
		}
		switch cmd {
		case "kill-node":
			return lab.KillNode(cfg, node)
		case "start-node":
			return lab.StartNode(ctx, cfg, node)
		}
		return lab.RemoveNode(ctx, cfg, node)
	case "add-node":
		cfg, _, err := parseCommon(cmd, rest, false)
		if err != nil {
			return err
		}
		n, err := lab.AddNode(ctx, cfg)
		if err != nil {
			return err
		}
		fmt.Println(n.Name) // what remove-node takes
		return nil
	case "forward": // started by up, not by users
		return forward(ctx, rest)
	default:
		fmt.Fprintln(os.Stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
}

// parseCommon parses --name and --dir, and the node's name for the node
// commands (before or after the flags).
func parseCommon(cmd string, args []string, wantNode bool) (lab.Config, string, error) {
	cfg := lab.Config{Out: os.Stderr}
	fs := flag.NewFlagSet("nodelet-lab "+cmd, flag.ContinueOnError)
	fs.StringVar(&cfg.Name, "name", lab.DefaultName, "name of the lab")
	fs.StringVar(&cfg.Dir, "dir", "", "state directory (default _output/lab, or _output/lab-NAME)")
	var node string
	if wantNode && len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		node, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return cfg, "", err
	}
	if wantNode && node == "" && fs.NArg() > 0 {
		node = fs.Arg(0)
		fs.Parse(fs.Args()[1:]) // flags after the node's name
	}
	switch {
	case wantNode && node == "":
		return cfg, "", fmt.Errorf("%s: the node's name is required (node1, node2, ...)", cmd)
	case fs.NArg() > 0:
		return cfg, "", fmt.Errorf("%s: unexpected arguments %q", cmd, fs.Args())
	}
	return cfg, node, nil
}

func up(ctx context.Context, args []string) error {
	cfg := lab.Config{Out: os.Stderr}
	fs := flag.NewFlagSet("nodelet-lab up", flag.ContinueOnError)
	fs.StringVar(&cfg.Name, "name", lab.DefaultName, "name of the lab (1-10 lowercase letters and digits)")
	fs.StringVar(&cfg.Dir, "dir", "", "state directory (default _output/lab, or _output/lab-NAME)")
	fs.IntVar(&cfg.Nodes, "nodes", lab.DefaultNodes, "number of nodes")
	fs.IntVar(&cfg.Port, "port", lab.DefaultPort, "port on 127.0.0.1 that reaches the API server (0 picks a free one)")
	fs.StringVar(&cfg.BinDir, "bin-dir", "", "directory of controlplane, nodelet and pause (default: this program's)")
	fs.Var((*stringList)(&cfg.ControlPlaneArgs), "controlplane-arg", "extra controlplane flag, e.g. --controlplane-arg=--node-monitor-grace-period=10s (repeatable)")
	fs.Var((*stringList)(&cfg.NodeletArgs), "nodelet-arg", "extra nodelet flag (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("up: unexpected arguments %q", fs.Args())
	}
	if cfg.BinDir == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find this program's directory: %w", err)
		}
		if exe, err = filepath.EvalSymlinks(exe); err != nil {
			return fmt.Errorf("find this program's directory: %w", err)
		}
		cfg.BinDir, cfg.LabBinary = filepath.Dir(exe), exe
	}
	st, err := lab.Up(ctx, cfg)
	if err != nil {
		return err
	}
	printSummary(st)
	return nil
}

func printSummary(st *lab.State) {
	fmt.Printf("lab %q is up: %d node(s)\n", st.Name, len(st.Nodes))
	for _, n := range st.Nodes {
		fmt.Printf("  %-8s %-14s netns %-16s logs %s\n", n.Name, n.IP, n.NetNS, n.LogDir)
	}
	fmt.Printf("  control plane %s in netns %s, on the host at %s (log %s)\n",
		st.ControlPlane.URL, st.NetNS, st.ControlPlane.HostURL, st.ControlPlane.Log)
	fmt.Printf("\n  export KUBECONFIG=%s\n  kubectl get nodes -o wide\n\n", st.Kubeconfig)
	down := "nodelet-lab down"
	if st.Name != lab.DefaultName {
		down += " --name " + st.Name
	}
	fmt.Printf("Remove it with: %s\n", down)
}

func forward(ctx context.Context, args []string) error {
	cfg := lab.ForwardConfig{Log: os.Stderr}
	fs := flag.NewFlagSet("nodelet-lab forward", flag.ContinueOnError)
	fs.StringVar(&cfg.Listen, "listen", "", "host address to listen on, e.g. 127.0.0.1:6443")
	fs.StringVar(&cfg.NetNS, "netns", "", "path of the network namespace to dial in")
	fs.StringVar(&cfg.To, "to", "", "address to dial inside the namespace")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cfg.Listen == "" || cfg.NetNS == "" || cfg.To == "" {
		return errors.New("forward: --listen, --netns and --to are required")
	}
	return lab.Forward(ctx, cfg)
}
