package runtime

// What the executor (package runtime/containerd) is asked to create: a
// pod's sandbox and its containers, each with its OCI spec or what builds
// it (spec_sandbox.go, spec_container.go).

import (
	"errors"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// ErrSandboxNotRunning is returned when a container is created in a
// sandbox whose pause process is not running.
var ErrSandboxNotRunning = errors.New("runtime: sandbox is not running")

// SandboxConfig describes one sandbox of a pod.
type SandboxConfig struct {
	Image       Image  // the pause image (EnsureImage)
	NetNSPath   string // the pod's network namespace, prepared by the caller
	CgroupsPath string // the pod's cgroup
	Attempt     uint32 // how many sandboxes the pod had before
	// Spec is the pause container's spec; nil builds it with SandboxSpec
	// from the pod, the image, NetNSPath, CgroupsPath and the floor.
	Spec *specs.Spec
}

// ContainerConfig describes one app or init container instance.
type ContainerConfig struct {
	SandboxID string
	Image     Image  // resolved by EnsureImage
	ImageName string // as the pod spec names it (status.image)
	Attempt   uint32 // restart count
	Init      bool
	// TargetContainerID is an ephemeral container's target (its
	// targetContainerName): the new container joins its PID namespace.
	TargetContainerID string
	// Spec is used as is when set. Otherwise ContainerSpec builds it from
	// SpecConfig, with Pod, Container, Image, SandboxPID and (when zero)
	// OOMScoreAdjFloor filled in.
	Spec       *specs.Spec
	SpecConfig ContainerSpecConfig
}
