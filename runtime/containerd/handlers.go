package containerd

import (
	"context"
	"fmt"

	runcoptions "github.com/containerd/containerd/api/types/runc/options"
	ctrdclient "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"

	"github.com/nodelet/nodelet/runtime"
)

// RuntimeClass handlers: a handler names an OCI runtime binary that the runc
// shim runs (its BinaryName option), as containerd's CRI plugin maps a
// handler to a runtime of its configuration. Every handler shares the
// shim, runc's state root and the cgroup driver; only the binary differs.

// handlerBinary is the OCI runtime of handler: the configured one, or for
// the default handler ("" or runc) RuntimeBinary ("" is the shim's own
// default, runc on containerd's PATH). An unknown handler is refused in
// containerd's CRI words, so the pod's event reads as kubelet's does.
func (c *Runtime) handlerBinary(handler string) (string, error) {
	if bin, ok := c.cfg.RuntimeHandlers[handler]; ok {
		return bin, nil
	}
	if handler == "" || handler == runtime.DefaultRuntimeHandler {
		if bin, ok := c.cfg.RuntimeHandlers[runtime.DefaultRuntimeHandler]; ok {
			return bin, nil
		}
		return c.cfg.RuntimeBinary, nil
	}
	return "", fmt.Errorf("failed to get sandbox runtime: %w", &runtime.UnknownRuntimeHandlerError{Handler: handler})
}

// runtimeOptions are the runc shim's options for handler (nil: its
// defaults, which are runc's state in /run/containerd/runc, the cgroupfs
// driver and the runc binary).
func (c *Runtime) runtimeOptions(handler string) (any, error) {
	bin, err := c.handlerBinary(handler)
	if err != nil {
		return nil, err
	}
	if c.cfg.RuncRoot == "" && !c.cfg.SystemdCgroup && bin == "" {
		return nil, nil
	}
	return &runcoptions.Options{Root: c.cfg.RuncRoot, SystemdCgroup: c.cfg.SystemdCgroup, BinaryName: bin}, nil
}

// sandboxRuntime is the runtime (shim and options) the sandbox id was
// created with, as an option of a new container: a pod's containers run
// with their sandbox's, as CRI runs them with the sandbox's handler.
// Copying the sandbox's record rather than resolving its handler again
// keeps a pod on one OCI runtime even if the node's handlers changed since
// its sandbox started. Without a sandbox (tests): the default handler's.
func (c *Runtime) sandboxRuntime(ctx context.Context, id string) (ctrdclient.NewContainerOpts, error) {
	if id == "" {
		opts, err := c.runtimeOptions("")
		if err != nil {
			return nil, err
		}
		return ctrdclient.WithRuntime(c.cfg.Runtime, opts), nil
	}
	sb, err := c.client.LoadContainer(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("load sandbox %s: %w", id, err)
	}
	info, err := sb.Info(ctx, ctrdclient.WithoutRefreshedMetadata)
	if err != nil {
		return nil, fmt.Errorf("runtime of sandbox %s: %w", id, err)
	}
	return func(_ context.Context, _ *ctrdclient.Client, ct *containers.Container) error {
		ct.Runtime = info.Runtime
		return nil
	}, nil
}
