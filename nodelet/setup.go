package nodelet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/cgroups"
	"github.com/nodelet/nodelet/csi"
	"github.com/nodelet/nodelet/network"
	"github.com/nodelet/nodelet/nodestatus"
	"github.com/nodelet/nodelet/podlifecycle"
	"github.com/nodelet/nodelet/runtime/containerd"
	"github.com/nodelet/nodelet/tokens"
	"github.com/nodelet/nodelet/volumes"
)

// components are the node's parts that Run sets up before wiring.
type components struct {
	rt     *containerd.Runtime
	cg     cgroups.Manager
	driver cgroups.Driver
	net    *network.Network
	vols   *volumes.Manager
	// csi registers the node's CSI drivers into drivers, which volumes
	// calls.
	csi     *csi.Watcher
	drivers *csi.Registry
	floor   int
	// alloc is the node's allocatable, the downward API's default for
	// limits a container does not set.
	alloc corev1.ResourceList
}

// setup connects containerd, imports the images and makes the cgroup,
// network and volume managers.
func (a *Agent) setup(ctx context.Context) (_ *components, retErr error) {
	c := &components{}
	if err := volumes.EnsureNodeDir(a.cfg.RootDir); err != nil {
		return nil, fmt.Errorf("nodelet: root dir: %w", err)
	}
	var err error
	if a.cfg.OOMScoreAdj != nil {
		if err := cgroups.SetOwnOOMScoreAdj(*a.cfg.OOMScoreAdj); err != nil {
			a.log.Info("keeping the oom_score_adj the nodelet was started with", "err", err)
		}
	}
	if c.floor, err = cgroups.OwnOOMScoreAdj(); err != nil {
		return nil, fmt.Errorf("nodelet: read own oom_score_adj: %w", err)
	}
	// Before the runtime: runc must use the driver the nodelet uses.
	if c.driver, err = cgroups.DetectDriver(a.cfg.CgroupDriver); err != nil {
		return nil, fmt.Errorf("nodelet: cgroup driver: %w", err)
	}
	a.log.Info("cgroup driver", "driver", c.driver, "mode", cgroups.DetectMode())
	c.rt, err = containerd.New(ctx, containerd.Config{Address: a.cfg.ContainerdAddress, Namespace: a.cfg.ContainerdNamespace,
		RuncRoot: a.cfg.RuncRoot, RuntimeBinary: a.cfg.RuntimeBinary, RuntimeHandlers: a.cfg.RuntimeHandlers,
		SystemdCgroup: c.driver == cgroups.DriverSystemd,
		StateDir:      a.cfg.StateDir, LogRoot: a.cfg.LogRoot, Logs: a.containerLogs(), LogRotation: a.logRotation(),
		OOMScoreAdjFloor: c.floor, Logger: a.log.With("component", "runtime"),
		SeccompProfileRoot: filepath.Join(a.cfg.RootDir, "seccomp"), SeccompDefault: a.cfg.SeccompDefault,
		Registry: containerd.RegistryConfig{ConfigDir: a.cfg.RegistryConfigDir, MaxParallelPulls: a.cfg.MaxParallelImagePulls,
			ObservePull: a.metrics.ObservePull}})
	if err != nil {
		return nil, fmt.Errorf("nodelet: connect containerd at %s: %w", a.cfg.ContainerdAddress, err)
	}
	defer func() {
		if retErr != nil {
			c.rt.Close()
		}
	}()
	if err := c.rt.ReattachInteractive(ctx); err != nil {
		a.log.Warn("reattach interactive containers", "err", err)
	}
	if err := a.importImages(ctx, c.rt); err != nil {
		return nil, err
	}
	alloc, err := a.setupCgroups(ctx, c)
	c.alloc = alloc
	if err != nil {
		return nil, err
	}
	c.net, err = network.New(network.Config{BinDirs: a.cfg.CNIBinDirs, ConfDir: a.cfg.CNIConfDir,
		CacheDir: filepath.Join(a.cfg.RootDir, "cni", "cache"), IPAMDir: filepath.Join(a.cfg.RootDir, "cni", "networks"),
		NetNSDir: a.cfg.NetNSDir, BridgeName: a.cfg.BridgeName, NetworkName: a.cfg.NetworkName,
		Log: a.log.With("component", "network")})
	if err != nil {
		return nil, fmt.Errorf("nodelet: network: %w", err)
	}
	c.drivers = csi.NewRegistry()
	if c.csi, err = csi.NewWatcher(csi.Config{Dir: csi.RegistrationDir(a.cfg.RootDir), NodeName: a.cfg.NodeName,
		Client: a.client, Registry: c.drivers, Log: a.log.With("component", "csi")}); err != nil {
		return nil, fmt.Errorf("nodelet: %w", err)
	}
	if c.vols, err = volumes.New(volumes.Config{RootDir: a.cfg.RootDir,
		Sources:  podlifecycle.VolumeObjects{APIObjects: podlifecycle.APIObjects{Client: a.client}, Manager: tokens.New(tokens.FromClient(a.client), nil)},
		Claims:   podlifecycle.APIObjects{Client: a.client},
		NodeName: a.cfg.NodeName, CSIDrivers: c.drivers, CSIObjects: podlifecycle.APIObjects{Client: a.client},
		NodeAllocatable: func() corev1.ResourceList { return alloc }, Log: a.log.With("component", "volumes")}); err != nil {
		return nil, fmt.Errorf("nodelet: volumes: %w", err)
	}
	return c, nil
}

// setupCgroups makes the cgroup manager and the QoS cgroups, and returns
// the node's allocatable. As upstream's --enforce-node-allocatable=pods:
// kubepods is capped at the node's allocatable, so pods cannot eat what
// --system-reserved and --kube-reserved keep for the rest of the host.
func (a *Agent) setupCgroups(ctx context.Context, c *components) (corev1.ResourceList, error) {
	host, err := nodestatus.ReadHost(a.cfg.RootDir)
	if err != nil {
		return nil, fmt.Errorf("nodelet: %w", err)
	}
	alloc := nodestatus.Allocatable(nodestatus.Capacity(host, a.maxPods()), a.cfg.SystemReserved, a.cfg.KubeReserved)
	c.cg, err = cgroups.New(cgroups.Config{Driver: string(c.driver), Root: a.cfg.CgroupRoot, Allocatable: alloc,
		PidsLimit: a.cfg.PodPidsLimit, Log: a.log.With("component", "cgroups")})
	if err != nil {
		return nil, fmt.Errorf("nodelet: cgroups: %w", err)
	}
	if err := c.cg.EnsureQoS(ctx); err != nil {
		return nil, fmt.Errorf("nodelet: QoS cgroups: %w", err)
	}
	return alloc, nil
}

// importImages imports every tarball of ImageDir, then makes sure the pause
// image is present (building it from PauseBinary if not).
func (a *Agent) importImages(ctx context.Context, rt *containerd.Runtime) error {
	if a.cfg.ImageDir != "" {
		entries, err := os.ReadDir(a.cfg.ImageDir)
		if err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("nodelet: read image dir %s: %w", a.cfg.ImageDir, err)
		}
		for _, e := range entries {
			if e.IsDir() || !isArchive(e.Name()) {
				continue
			}
			p := filepath.Join(a.cfg.ImageDir, e.Name())
			refs, err := rt.ImportArchive(ctx, p)
			if err != nil {
				return fmt.Errorf("nodelet: %w", err)
			}
			a.log.Info("images imported", "archive", p, "images", refs)
		}
	}
	if err := rt.EnsurePauseImage(ctx, a.cfg.PodInfraImage, a.cfg.PauseBinary, a.cfg.RootDir); err != nil {
		return fmt.Errorf("nodelet: %w", err)
	}
	return nil
}

func isArchive(name string) bool {
	for _, ext := range []string{".tar", ".tar.gz", ".tgz", ".oci"} {
		if len(name) > len(ext) && name[len(name)-len(ext):] == ext {
			return true
		}
	}
	return false
}
