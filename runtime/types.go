// Package runtime runs pods on containerd: images, sandboxes (a pause
// container holding the pod's namespaces), containers, labels and logs.
// This file is the vocabulary shared by the runtime, the pod plan, PLEG and
// the status computation: what the node knows about a pod's sandboxes and
// containers, independent of containerd's own types.
package runtime

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// State is the state of a sandbox or container as the runtime reports it.
type State string

const (
	StateCreated State = "created" // created, never started
	StateRunning State = "running"
	StateExited  State = "exited"
	StateUnknown State = "unknown" // the runtime could not tell (e.g. task lost)
)

// Labels put on every sandbox and container the nodelet creates, so that a
// restarted nodelet finds its pods from containerd alone.
const (
	LabelPodUID       = "io.nodelet.pod.uid"
	LabelPodName      = "io.nodelet.pod.name"
	LabelPodNamespace = "io.nodelet.pod.namespace"
	LabelContainer    = "io.nodelet.container.name" // absent on sandboxes
	LabelKind         = "io.nodelet.kind"           // "sandbox" or "container"
	LabelAttempt      = "io.nodelet.attempt"        // restart count of a container, sandbox generation
	LabelSandboxID    = "io.nodelet.sandbox.id"     // on containers: their sandbox
	LabelInit         = "io.nodelet.container.init" // "true" on init containers
)

// SandboxStatus describes one sandbox (pause container) of a pod. A pod
// normally has one; more exist briefly when a sandbox is being replaced.
type SandboxStatus struct {
	ID        string
	Attempt   uint32 // how many sandboxes this pod had before this one
	State     State
	CreatedAt time.Time
	// IP is the pod IP the network set up for this sandbox ("" if none yet).
	IP string
	// NetNSPath is the sandbox's network namespace (for CNI and for tests).
	NetNSPath string
}

// ContainerStatus describes one container instance. A restarted container
// leaves its previous instance behind (for `kubectl logs --previous` and
// the lastState), so one container name may have several instances.
type ContainerStatus struct {
	ID        string
	Name      string
	Init      bool
	Attempt   uint32 // restart count when this instance was created
	SandboxID string
	State     State
	CreatedAt time.Time
	StartedAt time.Time
	// FinishedAt, ExitCode and Reason are set once the container exited.
	FinishedAt time.Time
	ExitCode   int32
	Reason     string // e.g. "Completed", "Error", "OOMKilled"
	Message    string // the termination message, if any
	Image      string // the image as the pod spec names it
	ImageRef   string // the resolved image (digest), for status.imageID
	LogPath    string
}

// PodStatus is everything the runtime knows about one pod.
type PodStatus struct {
	UID       types.UID
	Name      string
	Namespace string
	// Sandboxes, newest first.
	Sandboxes []SandboxStatus
	// Containers, newest instance first for each name.
	Containers []ContainerStatus
}

// LatestSandbox returns the newest sandbox, or nil.
func (s *PodStatus) LatestSandbox() *SandboxStatus {
	if s == nil || len(s.Sandboxes) == 0 {
		return nil
	}
	return &s.Sandboxes[0]
}

// LatestContainer returns the newest instance of the named container, or nil.
func (s *PodStatus) LatestContainer(name string) *ContainerStatus {
	if s == nil {
		return nil
	}
	for i := range s.Containers {
		if s.Containers[i].Name == name {
			return &s.Containers[i]
		}
	}
	return nil
}
