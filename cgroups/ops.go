package cgroups

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"

	libcgroups "github.com/opencontainers/cgroups"
	v1fs "github.com/opencontainers/cgroups/fs"
	"github.com/opencontainers/cgroups/fs2"
	"github.com/opencontainers/cgroups/systemd"
)

// cgroupOps is what the Manager needs from a cgroup implementation: make a
// cgroup exist with given values, remove it, and say where it lives.
type cgroupOps interface {
	// apply creates n if it is missing (parents included) and writes r.
	apply(n Name, r Resources) error
	// destroy removes n; a missing cgroup is not an error. Callers first
	// make sure no process is left (pids).
	destroy(n Name) error
	// pids lists the processes in n and below it.
	pids(n Name) ([]int, error)
	// dirs lists n's directories, one per hierarchy (one on v2),
	// whether or not they exist.
	dirs(n Name) ([]string, error)
	// exists reports whether n exists in every hierarchy apply creates it
	// in (v1: the controllers whose values the nodelet sets; devices
	// and named hierarchies are left to the container runtime).
	exists(n Name) bool
}

// libOps implements cgroupOps with github.com/opencontainers/cgroups: its
// fs (v1) and fs2 (v2) managers for the cgroupfs driver, its systemd
// managers for the systemd driver.
type libOps struct {
	driver Driver
	mode   Mode
	// unifiedMount is where the v2 hierarchy is mounted (/sys/fs/cgroup).
	unifiedMount string
	// mkdirV2 creates a v2 cgroup directory and its parents for the
	// cgroupfs driver (fs2.CreateCgroupPath, what fs2's Apply does);
	// rmdir removes one cgroupfs directory and its empty children
	// (cgroups.RemovePath, what the fs and fs2 Destroy do, keeping the
	// errno). Tests point both at a fake tree.
	mkdirV2 func(dir string, c *libcgroups.Cgroup) error
	rmdir   func(dir string) error
}

func newLibOps(d Driver, m Mode) *libOps {
	return &libOps{
		driver:       d,
		mode:         m,
		unifiedMount: fs2.UnifiedMountpoint,
		mkdirV2:      fs2.CreateCgroupPath,
		rmdir:        libcgroups.RemovePath,
	}
}

// libConfig is the opencontainers/cgroups description of cgroup n with
// values r: a path for cgroupfs, a parent slice and a unit for systemd.
// Devices are never touched (they are the containers' business) and
// systemd's v1 freeze-on-set is skipped, as the kubelet does.
func libConfig(d Driver, m Mode, n Name, r Resources) *libcgroups.Cgroup {
	c := &libcgroups.Cgroup{Resources: libResources(m, r)}
	if d == DriverSystemd {
		c.Systemd = true
		c.Parent, c.Name = n.systemdParent()
	} else {
		c.Path = n.Cgroupfs()
	}
	return c
}

// libResources converts r for the library. On v2 cpu shares become
// cpu.weight (SharesToWeight).
func libResources(m Mode, r Resources) *libcgroups.Resources {
	out := &libcgroups.Resources{SkipDevices: true, SkipFreezeOnSet: true}
	if r.CPUShares != nil {
		if m == ModeV2 {
			out.CpuWeight = SharesToWeight(*r.CPUShares)
		} else {
			out.CpuShares = *r.CPUShares
		}
	}
	if r.CPUQuota != nil {
		out.CpuQuota = *r.CPUQuota
	}
	if r.CPUPeriod != nil {
		out.CpuPeriod = *r.CPUPeriod
	}
	if r.Memory != nil {
		out.Memory = *r.Memory
	}
	if r.PidsLimit != nil {
		p := *r.PidsLimit
		out.PidsLimit = &p
	}
	return out
}

// v2Dir is n's directory in the unified hierarchy.
func (o *libOps) v2Dir(n Name) string {
	return filepath.Join(o.unifiedMount, n.Path(o.driver))
}

func (o *libOps) manager(c *libcgroups.Cgroup, n Name) (libcgroups.Manager, error) {
	switch {
	case o.mode == ModeV2 && o.driver == DriverSystemd:
		return systemd.NewUnifiedManager(c, o.v2Dir(n))
	case o.mode == ModeV2:
		return fs2.NewManager(c, o.v2Dir(n))
	case o.driver == DriverSystemd:
		return systemd.NewLegacyManager(c, nil)
	default:
		return v1fs.NewManager(c, nil)
	}
}

func (o *libOps) apply(n Name, r Resources) error {
	c := libConfig(o.driver, o.mode, n, r)
	m, err := o.manager(c, n)
	if err != nil {
		return fmt.Errorf("cgroup manager for %s: %w", n.Path(o.driver), err)
	}
	if o.mode == ModeV2 && o.driver == DriverCgroupfs {
		err = o.mkdirV2(o.v2Dir(n), c)
	} else {
		err = m.Apply(-1) // -1: create only, move no process
	}
	if err != nil {
		return fmt.Errorf("create cgroup %s: %w", n.Path(o.driver), err)
	}
	if err := m.Set(c.Resources); err != nil {
		return fmt.Errorf("set values of cgroup %s: %w", n.Path(o.driver), err)
	}
	return nil
}

func (o *libOps) destroy(n Name) error {
	if o.driver == DriverSystemd {
		m, err := o.manager(libConfig(o.driver, o.mode, n, Resources{}), n)
		if err != nil {
			return fmt.Errorf("cgroup manager for %s: %w", n.Path(o.driver), err)
		}
		if err := m.Destroy(); err != nil {
			return fmt.Errorf("remove cgroup %s: %w", n.Path(o.driver), err)
		}
		return nil
	}
	dirs, err := o.dirs(n)
	if err != nil {
		return err
	}
	var errs []error
	for _, dir := range dirs {
		if err := o.rmdir(dir); err != nil {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dir, err))
		}
	}
	return errors.Join(errs...)
}

func (o *libOps) pids(n Name) ([]int, error) {
	dirs, err := o.dirs(n)
	if err != nil {
		return nil, err
	}
	seen := map[int]bool{}
	for _, dir := range dirs {
		pids, err := libcgroups.GetAllPids(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list processes of cgroup %s: %w", dir, err)
		}
		for _, p := range pids {
			seen[p] = true
		}
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

func (o *libOps) exists(n Name) bool {
	if o.mode == ModeV2 {
		return libcgroups.PathExists(o.v2Dir(n))
	}
	m, err := o.manager(libConfig(o.driver, o.mode, n, Resources{}), n)
	if err != nil {
		return false
	}
	paths := m.GetPaths()
	found := 0
	// The controllers a pod cgroup must exist in, as the kubelet's (those
	// mounted here).
	for _, ctrl := range []string{"cpu", "cpuacct", "cpuset", "memory", "pids"} {
		p, ok := paths[ctrl]
		if !ok || p == "" {
			continue // not mounted here
		}
		if !libcgroups.PathExists(p) {
			return false
		}
		found++
	}
	return found > 0
}

func (o *libOps) dirs(n Name) ([]string, error) {
	if o.mode == ModeV2 {
		return []string{o.v2Dir(n)}, nil
	}
	m, err := o.manager(libConfig(o.driver, o.mode, n, Resources{}), n)
	if err != nil {
		return nil, fmt.Errorf("cgroup manager for %s: %w", n.Path(o.driver), err)
	}
	paths := m.GetPaths()
	keys := slices.Sorted(maps.Keys(paths))
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		if paths[k] != "" {
			out = append(out, paths[k])
		}
	}
	return out, nil
}
