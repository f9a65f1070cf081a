package cgroups

import (
	"fmt"

	libcgroups "github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/systemd"
)

// Driver names who manages the cgroup tree: the nodelet itself writing the
// cgroup filesystem, or systemd (slices created over D-Bus).
type Driver string

const (
	DriverCgroupfs Driver = "cgroupfs"
	DriverSystemd  Driver = "systemd"
)

// Mode is the cgroup hierarchy layout of the host.
type Mode string

const (
	// ModeV1 is one hierarchy per controller (also the "hybrid" layout,
	// where a controller-less cgroup2 sits at /sys/fs/cgroup/unified).
	ModeV1 Mode = "v1"
	// ModeV2 is the unified hierarchy mounted at /sys/fs/cgroup.
	ModeV2 Mode = "v2"
)

// ResolveDriver turns a requested driver ("" for auto) into the driver to
// use. Auto picks systemd when systemd booted the host (sd_booted(3):
// /run/systemd/system exists), cgroupfs otherwise. Asking for systemd on a
// host without it is an error; so is an unknown name.
func ResolveDriver(requested string, systemdRunning bool) (Driver, error) {
	switch Driver(requested) {
	case "":
		if systemdRunning {
			return DriverSystemd, nil
		}
		return DriverCgroupfs, nil
	case DriverCgroupfs:
		return DriverCgroupfs, nil
	case DriverSystemd:
		if !systemdRunning {
			return "", fmt.Errorf("cgroup driver %q: %w", requested, ErrNoSystemd)
		}
		return DriverSystemd, nil
	}
	return "", fmt.Errorf("cgroup driver %q: %w", requested, ErrUnknownDriver)
}

// ResolveMode turns a requested mode ("" for auto) into the mode to use.
func ResolveMode(requested Mode, unified bool) (Mode, error) {
	switch requested {
	case "":
		if unified {
			return ModeV2, nil
		}
		return ModeV1, nil
	case ModeV1, ModeV2:
		return requested, nil
	}
	return "", fmt.Errorf("cgroup mode %q: %w", requested, ErrUnknownMode)
}

// DetectDriver resolves requested against this host. The nodelet calls it
// once and hands the result to both New and the runtime (runc must use the
// same driver for containers).
func DetectDriver(requested string) (Driver, error) {
	return ResolveDriver(requested, systemd.IsRunningSystemd())
}

// DetectMode reports this host's cgroup layout (statfs magic of
// /sys/fs/cgroup).
func DetectMode() Mode {
	m, _ := ResolveMode("", libcgroups.IsCgroup2UnifiedMode())
	return m
}
