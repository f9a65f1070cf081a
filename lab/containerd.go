package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
)

// containerdAnswers tells whether the containerd at sock replies to a
// version call.
func containerdAnswers(ctx context.Context, sock string) bool {
	if _, err := os.Stat(sock); err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	client, err := containerd.New(sock, containerd.WithTimeout(5*time.Second))
	if err != nil {
		return false
	}
	defer client.Close()
	_, err = client.Version(ctx)
	return err == nil
}

// startContainerd writes the node's containerd configuration and starts
// it inside the node's namespace (its shims, and so the containers' log
// drivers and host-network containers, live there too). The caller records
// the PID before waitContainerd.
func startContainerd(n *Node) error {
	cfgPath := filepath.Join(n.Dir, "containerd.toml")
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	if err := os.MkdirAll(filepath.Dir(n.ContainerdAddress), 0o700); err != nil {
		return fmt.Errorf("node %s: socket directory: %w", n.Name, err)
	}
	if err := os.WriteFile(cfgPath, []byte(containerdConfig(n)), 0o644); err != nil {
		return fmt.Errorf("node %s: write containerd config: %w", n.Name, err)
	}
	// The node's resolvers, for the names its cluster DNS forwards: the
	// node's own loopback, where nothing answers (the lab has no way out,
	// and it never sends the host's resolvers anything).
	if err := os.WriteFile(filepath.Join(n.Dir, "resolv.conf"), []byte("nameserver 127.0.0.1\n"), 0o644); err != nil {
		return fmt.Errorf("node %s: write resolv.conf: %w", n.Name, err)
	}
	pid, err := startDetached(n.ContainerdArgs, n.ContainerdLog)
	if err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	n.ContainerdPID = pid
	return nil
}

// waitContainerd waits until the node's containerd answers.
func waitContainerd(ctx context.Context, n *Node) error {
	p := watched{what: "containerd of " + n.Name, pid: n.ContainerdPID, argv: n.ContainerdArgs, log: n.ContainerdLog}
	return waitFor(ctx, "containerd of "+n.Name+" to answer at "+n.ContainerdAddress, 30*time.Second,
		[]watched{p}, func(ctx context.Context) (bool, error) {
			return containerdAnswers(ctx, n.ContainerdAddress), nil
		})
}

// cleanupContainerd kills every task and deletes every container (with its
// snapshot) in every namespace of the containerd at sock, so that runc's
// state, the shims and the rootfs mounts go the way they came.
func cleanupContainerd(ctx context.Context, sock string) error {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	client, err := containerd.New(sock, containerd.WithTimeout(5*time.Second))
	if err != nil {
		return fmt.Errorf("connect containerd %s: %w", sock, err)
	}
	defer client.Close()
	nss, err := client.NamespaceService().List(ctx)
	if err != nil {
		return fmt.Errorf("containerd %s: list namespaces: %w", sock, err)
	}
	var errs []error
	for _, ns := range nss {
		nsCtx := namespaces.WithNamespace(ctx, ns)
		containers, err := client.Containers(nsCtx)
		if err != nil {
			errs = append(errs, fmt.Errorf("containerd %s: list containers in %s: %w", sock, ns, err))
			continue
		}
		for _, c := range containers {
			if err := deleteContainer(nsCtx, c); err != nil {
				errs = append(errs, fmt.Errorf("containerd %s: container %s/%s: %w", sock, ns, c.ID(), err))
			}
		}
	}
	return errors.Join(errs...)
}

func deleteContainer(ctx context.Context, c containerd.Container) error {
	if task, err := c.Task(ctx, nil); err == nil {
		if _, err := task.Delete(ctx, containerd.WithProcessKill); err != nil {
			return fmt.Errorf("delete task: %w", err)
		}
	}
	if err := c.Delete(ctx, containerd.WithSnapshotCleanup); err != nil {
		return fmt.Errorf("delete container: %w", err)
	}
	return nil
}

// shimsOf lists the shims that serve the containerd at sock (they name its
// socket in their argv), which can outlive it.
func shimsOf(sock string) []int {
	var out []int
	for _, pid := range pids() {
		args := cmdline(pid)
		if len(args) > 0 && strings.Contains(args[0], "containerd-shim") && slices.Contains(args, sock) {
			out = append(out, pid)
		}
	}
	return out
}

func killShims(sock string) {
	for _, pid := range shimsOf(sock) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}
