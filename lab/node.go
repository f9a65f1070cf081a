package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// startNode starts the node's containerd, gives the node its identity (a
// client certificate for system:node:NAME and a serving certificate for
// its address) and starts its nodelet.
func startNode(ctx context.Context, cfg *Config, st *State, n *Node) error {
	cfg.logf("starting %s in %s at %s (logs in %s)", n.Name, n.NetNS, n.IP, n.LogDir)
	if err := startContainerd(n); err != nil {
		return err
	}
	if err := st.save(); err != nil {
		return err
	}
	if err := waitContainerd(ctx, n); err != nil {
		return err
	}
	// Each node has its own identity, as a real node would: the node
	// authorizer and the audit log see system:node:NAME, never an admin.
	if err := writeKubeconfig(cfg, n.Kubeconfig, "system:node:"+n.Name, "system:nodes", st.ControlPlane.URL); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	if err := servingCert(cfg, st, n); err != nil {
		return err
	}
	pid, err := startDetached(n.NodeletArgs, n.NodeletLog)
	if err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	n.NodeletPID = pid
	return st.save()
}

// servingCert has the cluster CA sign the nodelet's serving certificate for
// its address: the API server verifies the nodelet when it proxies logs,
// exec and port-forward.
func servingCert(cfg *Config, st *State, n *Node) error {
	out, err := exec.Command(filepath.Join(cfg.BinDir, "controlplane"), "serving-cert",
		"--data-dir", st.ControlPlane.DataDir, "--node-name", n.Name, "--host", n.IP,
		"--cert-file", filepath.Join(n.Dir, "serving.crt"), "--key-file", filepath.Join(n.Dir, "serving.key")).CombinedOutput()
	if err != nil {
		return fmt.Errorf("node %s: controlplane serving-cert: %w: %s", n.Name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// loadNode reads the lab's state and finds node in it, for the commands
// that act on one node; it completes cfg.
func loadNode(cfg *Config, node string) (*State, *Node, error) {
	if err := cfg.complete(false); err != nil {
		return nil, nil, err
	}
	st, err := Load(cfg.Dir)
	if err != nil {
		return nil, nil, err
	}
	n, err := st.node(node)
	if err != nil {
		return nil, nil, err
	}
	return st, n, nil
}

// KillNode SIGKILLs the node's nodelet and containerd, as a crashed
// machine would lose them. Its containers and their shims keep running:
// StartNode brings the node back to them.
func KillNode(cfg Config, node string) error {
	st, n, err := loadNode(&cfg, node)
	if err != nil {
		return err
	}
	errs := []error{
		killProcess("the nodelet of "+n.Name, n.NodeletPID, n.NodeletArgs),
		killProcess("containerd of "+n.Name, n.ContainerdPID, n.ContainerdArgs),
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	n.NodeletPID, n.ContainerdPID = 0, 0
	cfg.logf("killed the nodelet and containerd of %s", n.Name)
	return st.save()
}

// StartNode starts the node's containerd and nodelet again, with the same
// command lines, when they are not running; it waits for containerd to
// answer, not for the node to be Ready.
func StartNode(ctx context.Context, cfg Config, node string) error {
	st, n, err := loadNode(&cfg, node)
	if err != nil {
		return err
	}
	if !running(n.ContainerdPID, n.ContainerdArgs) {
		// The config file is rewritten as it was: startContainerd makes
		// the node's directories too.
		if err := startContainerd(n); err != nil {
			return err
		}
		if err := st.save(); err != nil {
			return err
		}
		if err := waitContainerd(ctx, n); err != nil {
			return err
		}
	}
	if !running(n.NodeletPID, n.NodeletArgs) {
		if _, err := os.Stat(n.Kubeconfig); err != nil {
			return fmt.Errorf("node %s was never fully started (%w); run down and up", n.Name, err)
		}
		if n.NodeletPID, err = startDetached(n.NodeletArgs, n.NodeletLog); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	cfg.logf("started %s: containerd pid %d, nodelet pid %d", n.Name, n.ContainerdPID, n.NodeletPID)
	return st.save()
}
