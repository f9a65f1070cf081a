// Package runtime is the pure half of the node's container runtime: the
// vocabulary of pods, sandboxes and containers as the node sees them
// (types.go), the pod plan (plan.go), the OCI specs of sandboxes and
// containers (spec*.go), termination messages, the container and image GC
// plans, log paths, and the DNS, hosts and environment a container gets.
// It never talks to containerd: package runtime/containerd executes what
// is decided here, and the status, PLEG, stats and node API depend on this
// package alone. This file is the vocabulary shared by the executor, the
// pod plan, PLEG and the status computation: what the node knows about a
// pod's sandboxes and containers, independent of containerd's own types.
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

// Labels the executor keeps on containers besides the shared ones above:
// what the pod spec named, where the logs are, and the start and exit of
// the container's task, which outlive the task.
const (
	LabelImage      = "io.nodelet.image"     // the image as the pod spec names it
	LabelImageRef   = "io.nodelet.image.ref" // the resolved image (repo digest)
	LabelLogPath    = "io.nodelet.log.path"
	LabelNetNSPath  = "io.nodelet.sandbox.netns"
	LabelSandboxIP  = "io.nodelet.sandbox.ip"
	LabelStartedAt  = "io.nodelet.started-at"  // RFC 3339, set when the task started
	LabelFinishedAt = "io.nodelet.finished-at" // RFC 3339, set when the exit was recorded
	LabelExitCode   = "io.nodelet.exit-code"
	LabelOOMKilled  = "io.nodelet.oom-killed" // "true" once the OOM killer acted in the container
)

// Values of LabelKind.
const (
	KindSandbox   = "sandbox"
	KindContainer = "container"
)

// LabelInteractive marks a container with stdin or a tty: its value lists
// "stdin", "once" (stdinOnce) and "tty".
const LabelInteractive = "io.nodelet.container.interactive"

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

// TaskExit is the exit of a sandbox's or container's main process.
type TaskExit struct {
	ContainerID string
	ExitCode    uint32
	ExitedAt    time.Time
}

// ContainerMetrics is one reading of the resource usage of a running
// sandbox (pause container) or app/init container, taken from its cgroup.
// The counters (CPU time, page faults) are cumulative since the container
// started; the memory figures are instantaneous.
type ContainerMetrics struct {
	PodUID       types.UID
	PodName      string
	PodNamespace string
	// Name is the container's name in the pod spec; "" for a sandbox.
	Name    string
	Sandbox bool
	ID      string
	// StartedAt is when the container's task started (a sandbox's: when
	// it was created, which is within milliseconds of its start).
	StartedAt time.Time
	// Timestamp is when the shim read the cgroup.
	Timestamp time.Time

	CPUUsageNanoseconds uint64 // cumulative CPU time, all cores
	MemoryUsageBytes    uint64 // the cgroup's memory usage (page cache included)
	// WorkingSetBytes is usage minus the inactive file cache (v1
	// total_inactive_file, v2 inactive_file), never negative: what the
	// kubelet and kubectl top call the working set.
	WorkingSetBytes uint64
	RSSBytes        uint64 // anonymous memory (v1 total_rss, v2 anon)
	PageFaults      uint64
	MajorPageFaults uint64
}
