package runtime

// What the executor (package runtime/containerd) is asked to create: a
// pod's sandbox and its containers, each with its OCI spec or what builds
// it (spec_sandbox.go, spec_container.go).

import (
	"errors"
	"fmt"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// ErrSandboxNotRunning is returned when a container is created in a
// sandbox whose pause process is not running.
var ErrSandboxNotRunning = errors.New("runtime: sandbox is not running")

// UnknownRuntimeHandlerError is returned when a sandbox asks for a
// RuntimeClass handler the node has no OCI runtime for: the pod cannot run
// here until the node's configuration names one. Its text is containerd
// CRI's, which kubelet's FailedCreatePodSandBox events carry.
type UnknownRuntimeHandlerError struct{ Handler string }

func (e *UnknownRuntimeHandlerError) Error() string {
	return fmt.Sprintf("no runtime for %q is configured", e.Handler)
}

// DefaultRuntimeHandler is the handler of pods without a RuntimeClass
// (upstream's runc default); the node's default OCI runtime serves it.
const DefaultRuntimeHandler = "runc"

// SandboxConfig describes one sandbox of a pod.
type SandboxConfig struct {
	Image       Image  // the pause image (EnsureImage)
	NetNSPath   string // the pod's network namespace, prepared by the caller
	CgroupsPath string // the pod's cgroup
	Attempt     uint32 // how many sandboxes the pod had before
	// RuntimeHandler is the handler of the pod's RuntimeClass ("" or
	// DefaultRuntimeHandler: the node's default OCI runtime). The pod's
	// containers run with their sandbox's runtime.
	RuntimeHandler string
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
