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
// use on a host where systemdBooted tells whether systemd booted it
// (sd_booted(3): /run/systemd/system exists) and unified whether the
// cgroup v2 hierarchy is mounted at /sys/fs/cgroup.
//
// Auto picks systemd only when both hold: on cgroup v2 systemd owns the
// one tree and expects to be its only writer (the kubelet's documented
// recommendation), while on v1 and hybrid hosts cgroupfs is upstream's
// default and works beside systemd. Explicit "systemd" is honoured on any
// systemd host, v1 included; asking for it without systemd is an error,
// and so is an unknown name.
func ResolveDriver(requested string, systemdBooted, unified bool) (Driver, error) {
	switch Driver(requested) {
	case "":
		if systemdBooted && unified {
			return DriverSystemd, nil
		}
		return DriverCgroupfs, nil
	case DriverCgroupfs:
		return DriverCgroupfs, nil
	case DriverSystemd:
		if !systemdBooted {
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
	return ResolveDriver(requested, systemd.IsRunningSystemd(), libcgroups.IsCgroup2UnifiedMode())
}

// DetectMode reports this host's cgroup layout: v2 when the filesystem at
// /sys/fs/cgroup is cgroup2 (statfs magic CGROUP2_SUPER_MAGIC; a hybrid
// host has tmpfs there), v1 otherwise.
func DetectMode() Mode {
	m, _ := ResolveMode("", libcgroups.IsCgroup2UnifiedMode())
	return m
}
