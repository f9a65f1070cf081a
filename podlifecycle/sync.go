// Package podlifecycle is the life of a pod on the node, between the pod
// workers (podworkers, whose contract it implements) and the node's parts.
//
//   - The Syncer (sync*.go) makes a pod run as its spec says: it plans
//     (runtime.ComputePodActions, pure: what to kill and start, back-offs,
//     waiting reasons) then acts (network, cgroups, volumes, the runtime),
//     then reports the status to the status manager. SyncTerminatingPod
//     stops the pod within its grace period (preStop hooks first) and
//     marks its status terminal, with the eviction's status for an
//     evicted pod; SyncTerminatedPod releases what it still holds.
//   - The Admitter decides once whether a pod new to the node may run.
//   - Evictions and the Evictor carry out the eviction manager's choices.
//   - Orphans finds what the node holds of pods the API no longer has.
//
// It reads the workers' state only from a podworkers.Lifecycle snapshot
// and never calls back into the component that calls it.
package podlifecycle

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/cgroups"
	"github.com/nodelet/nodelet/network"
	"github.com/nodelet/nodelet/podworkers"
	"github.com/nodelet/nodelet/prober"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/status"
	"github.com/nodelet/nodelet/volumes"
)

// Runtime is what the Syncer uses of *containerd.Runtime.
type Runtime interface {
	EnsureImage(ctx context.Context, ref string, policy corev1.PullPolicy) (runtime.Image, error)
	EnsureImageWith(ctx context.Context, ref string, opts runtime.PullOptions) (runtime.Image, runtime.PullResult, error)
	ImagePresent(ctx context.Context, ref string) bool
	RunSandbox(ctx context.Context, pod *corev1.Pod, cfg runtime.SandboxConfig) (string, error)
	SetSandboxIP(ctx context.Context, id, ip string) error
	StopSandbox(ctx context.Context, id string) error
	RemoveSandbox(ctx context.Context, id string) error
	CreateContainer(ctx context.Context, pod *corev1.Pod, ctr *corev1.Container, cfg runtime.ContainerConfig) (string, error)
	StartContainer(ctx context.Context, id string) error
	StopContainer(ctx context.Context, id string, grace time.Duration) error
	ExecSync(ctx context.Context, id string, cmd []string) (output []byte, exitCode int, err error)
	RemoveContainer(ctx context.Context, id string) error
}

// Network is what the Syncer uses of *network.Network.
type Network interface {
	SetupPod(ctx context.Context, p network.PodNetwork) (network.Result, error)
	TeardownPod(ctx context.Context, p network.PodNetwork) error
}

// Volumes is what the Syncer uses of *volumes.Manager.
type Volumes interface {
	// SetupPod prepares the pod's volumes and, at every later sync,
	// rewrites configMap, secret, downwardAPI and projected volumes whose
	// content changed (so running containers see updated objects).
	SetupPod(ctx context.Context, pod *corev1.Pod) (map[string]volumes.Mount, error)
	// PrepareSubPath resolves a volumeMount's subPath inside its volume
	// (creating it when missing) and returns the host path to bind.
	PrepareSubPath(pod *corev1.Pod, container string, index int, volume string, mnt volumes.Mount, sub string) (string, error)
	TeardownPod(ctx context.Context, uid types.UID) error
}

// Probes runs the pods' liveness, readiness and startup probes
// (*prober.Manager).
type Probes interface {
	UpdatePod(pod *corev1.Pod, podIP string, containers []prober.ContainerState)
	RemovePod(uid types.UID)
	Results(uid types.UID) map[string]prober.ContainerResults
	Readiness(containerID string) (ready, known bool)
	Startup(containerID string) (started, known bool)
}

// StatusSink receives the pod statuses the Syncer computes
// (*status.Manager).
type StatusSink interface {
	SetPodStatus(pod *corev1.Pod, st corev1.PodStatus)
	// GetPodStatus returns the desired status recorded for the pod.
	GetPodStatus(uid types.UID) (corev1.PodStatus, bool)
	// TerminatePod records that the pod's containers are stopped for good
	// (a finished pod's terminal phase is written, a deleted pod's
	// deletion may be confirmed).
	TerminatePod(pod *corev1.Pod)
}

// PodStatusFunc returns the runtime's current view of one pod; a pod the
// runtime does not know has an empty status (not an error).
type PodStatusFunc func(ctx context.Context, uid types.UID) (*runtime.PodStatus, error)

// SyncerConfig configures a Syncer.
type SyncerConfig struct {
	Runtime Runtime
	Network Network
	Cgroups cgroups.Manager
	// CgroupDriver spells the containers' cgroupsPath (cgroupfs default).
	CgroupDriver cgroups.Driver
	Volumes      Volumes
	Status       StatusSink
	// PodStatus reads the runtime's state of a pod, fresh (not a stale
	// cache): PodStatusFromList(rt.PodStatuses) or the PLEG cache.
	PodStatus PodStatusFunc
	// Probes, optional, runs the probes; their results enter the plan
	// (failed liveness: restart) and the status (ready, started).
	Probes Probes
	// Services, optional, lists the cluster's Services (an informer's
	// lister) for the containers' service environment variables.
	Services func() ([]*corev1.Service, error)
	// Recorder, optional, records the pod's events (Pulling, Created,
	// Started, Killing, BackOff, ...).
	Recorder EventRecorder
	// Objects gives the ConfigMaps and Secrets containers refer to (env,
	// envFrom) and the pods' imagePullSecrets; the Syncer fetches them
	// before building a container's spec or pulling its image.
	Objects ObjectSource
	// Evicted, optional, gives the final status of the pods the eviction
	// manager evicted; SyncTerminatingPod sets it once they are stopped.
	Evicted EvictedStatus
	// RuntimeHandler, optional, gives the handler of the pod's
	// RuntimeClass for its sandbox (runtimeclass.go); nil: the default.
	RuntimeHandler RuntimeHandlerFunc
	// Backoff delays crashing containers' restarts; nil never delays.
	Backoff    *runtime.Backoff
	PauseImage string
	NodeName   string
	NodeIP     string
	// ClusterDNS and ClusterDomain make the pods' resolv.conf and hosts.
	ClusterDNS    []string
	ClusterDomain string
	// HostResolvConf is the node's resolv.conf (for dnsPolicy Default);
	// nil reads /etc/resolv.conf.
	HostResolvConf []byte
	// HostHostsFile is the node's hosts file, copied for host-network pods
	// (/etc/hosts when empty).
	HostHostsFile string
	// PodFilesDir holds each pod's generated hosts and resolv.conf
	// (PodFilesDir/<uid>/); empty leaves the image's files.
	PodFilesDir string
	// PodContentRemovable reports whether a terminated pod's logs may be
	// removed: it is gone from the API. A finished pod still in the API
	// keeps them for kubectl logs; housekeeping removes them once it is
	// deleted. Nil: always.
	PodContentRemovable func(uid types.UID) bool
	// LogRoot is the runtime's log root (runtime.DefaultLogRoot when empty);
	// SyncTerminatedPod removes the pod's directory under it.
	LogRoot          string
	OOMScoreAdjFloor int
	MemoryCapacity   int64
	// Allocatable is the node's allocatable: the downward API (env) reads
	// it for a cpu, memory or ephemeral-storage limit a container does not
	// set, as upstream.
	Allocatable corev1.ResourceList
	// Now defaults to time.Now.
	Now func() time.Time
	Log *slog.Logger
}

// Syncer implements podworkers.Syncer on the real node components.
type Syncer struct {
	cfg SyncerConfig
	log *slog.Logger
	// pullBackoff records failed image pulls; the plan holds back the
	// containers whose pull is in back-off (ImagePullBackOff).
	pullBackoff *runtime.PullBackoff
}

var _ podworkers.Syncer = (*Syncer)(nil)

// NewSyncer checks cfg and returns a Syncer.
func NewSyncer(cfg SyncerConfig) (*Syncer, error) {
	switch {
	case cfg.Runtime == nil, cfg.Network == nil, cfg.Cgroups == nil, cfg.Volumes == nil,
		cfg.Status == nil, cfg.PodStatus == nil:
		return nil, errors.New("nodelet: syncer needs Runtime, Network, Cgroups, Volumes, Status and PodStatus")
	case cfg.PauseImage == "":
		return nil, errors.New("nodelet: syncer needs PauseImage")
	}
	if cfg.CgroupDriver == "" {
		cfg.CgroupDriver = cgroups.DriverCgroupfs
	}
	if cfg.LogRoot == "" {
		cfg.LogRoot = runtime.DefaultLogRoot
	}
	if cfg.HostHostsFile == "" {
		cfg.HostHostsFile = "/etc/hosts"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.HostResolvConf == nil {
		cfg.HostResolvConf, _ = os.ReadFile("/etc/resolv.conf") // missing: empty
	}
	return &Syncer{cfg: cfg, log: cfg.Log,
		pullBackoff: runtime.NewPullBackoff(runtime.DefaultPullBackoffInitial, runtime.DefaultPullBackoffMax, cfg.Now)}, nil
}

// PodStatusFromList adapts a lister of every pod's status (such as
// (*containerd.Runtime).PodStatuses) to a PodStatusFunc.
func PodStatusFromList(list func(ctx context.Context) ([]runtime.PodStatus, error)) PodStatusFunc {
	return func(ctx context.Context, uid types.UID) (*runtime.PodStatus, error) {
		all, err := list(ctx)
		if err != nil {
			return nil, err
		}
		for i := range all {
			if all[i].UID == uid {
				return &all[i], nil
			}
		}
		return &runtime.PodStatus{UID: uid}, nil
	}
}

func podRef(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }

func (s *Syncer) podStatus(ctx context.Context, pod *corev1.Pod) (*runtime.PodStatus, error) {
	rs, err := s.cfg.PodStatus(ctx, pod.UID)
	if err != nil {
		return nil, fmt.Errorf("get runtime status of pod %s: %w", podRef(pod), err)
	}
	if rs == nil {
		rs = &runtime.PodStatus{UID: pod.UID}
	}
	rs.UID, rs.Name, rs.Namespace = pod.UID, pod.Name, pod.Namespace
	return rs, nil
}

// SyncPod makes the pod run as its spec says, then reports its status. The
// result asks for the next sync when a back-off ends, and says when the
// pod has finished.
func (s *Syncer) SyncPod(ctx context.Context, pod *corev1.Pod) (podworkers.SyncResult, error) {
	rs, err := s.podStatus(ctx, pod)
	if err != nil {
		return podworkers.SyncResult{}, err
	}
	exceeded, left := activeDeadline(pod, s.startTime(pod), s.cfg.Now())
	if exceeded {
		// Nothing more starts; the Failed status goes out now, the
		// containers are stopped by SyncTerminatingPod.
		s.podEvent(pod, corev1.EventTypeNormal, ReasonDeadlineExceeded, "%s", MessageDeadlineExceeded)
		_, err := s.reportStatus(ctx, pod, nil, false)
		return podworkers.SyncResult{Finished: err == nil}, err
	}
	var backoff runtime.BackoffFunc
	if s.cfg.Backoff != nil {
		backoff = s.cfg.Backoff.InBackoff
	}
	actions := runtime.ComputePodActions(pod, runtime.PlanInputs{Status: rs, Now: s.cfg.Now(), Backoff: backoff,
		PullBackoff: s.pullBackoff.InBackoff, Unhealthy: s.probe(pod, rs)})
	// Why containers wait: the plan's held-back containers, then the start
	// failures of this sync.
	waiting := map[string]corev1.ContainerStateWaiting{}
	var pullWaits []error
	for _, name := range slices.Sorted(maps.Keys(actions.Waiting)) {
		w := actions.Waiting[name]
		waiting[name] = w
		switch w.Reason {
		case runtime.ReasonCrashLoopBackOff:
			s.containerEvent(pod, name, corev1.EventTypeWarning, eventBackOff, "Back-off restarting failed container %s in pod %s", name, podRef(pod))
		case runtime.ReasonImagePullBackOff:
			s.containerEvent(pod, name, corev1.EventTypeNormal, eventBackOff, "%s", w.Message)
			// A pull in back-off fails the sync, as the failed pull did
			// (upstream's ErrImagePullBackOff).
			pullWaits = append(pullWaits, fmt.Errorf("pull image for container %s of pod %s: %s", name, podRef(pod), w.Message))
		}
	}
	actErr := s.act(ctx, pod, rs, &actions)
	for _, se := range startErrors(actErr) {
		if w, ok := runtime.WaitingFor(se); ok {
			waiting[se.Container] = w
		}
	}
	actErr = errors.Join(append(pullWaits, actErr)...)
	res := podworkers.SyncResult{ResyncAfter: actions.RetryAfter}
	if left > 0 && (res.ResyncAfter <= 0 || left < res.ResyncAfter) {
		res.ResyncAfter = left // be back when the deadline passes
	}
	phase, err := s.reportStatus(ctx, pod, waiting, false)
	if err != nil {
		return res, errors.Join(actErr, err)
	}
	res.Finished = actErr == nil && (phase == corev1.PodSucceeded || phase == corev1.PodFailed)
	return res, actErr
}

// reportStatus computes the status from a fresh runtime status and returns
// its phase.
func (s *Syncer) reportStatus(ctx context.Context, pod *corev1.Pod, waiting map[string]corev1.ContainerStateWaiting, terminal bool) (corev1.PodPhase, error) {
	rs, err := s.podStatus(context.WithoutCancel(ctx), pod)
	if err != nil {
		return "", err
	}
	var hostIPs []string
	if s.cfg.NodeIP != "" {
		hostIPs = []string{s.cfg.NodeIP}
	}
	in := status.Inputs{Now: s.cfg.Now(), HostIPs: hostIPs, PodIsTerminal: terminal, Waiting: waiting}
	if s.cfg.Probes != nil {
		in.Readiness, in.Startup = s.cfg.Probes.Readiness, s.cfg.Probes.Startup
	}
	start := s.startTime(pod)
	st := status.Compute(pod, rs, in)
	if start == nil {
		start = st.StartTime
	}
	failPastDeadline(pod, start, &st, in.Now)
	s.cfg.Status.SetPodStatus(pod, st)
	return st.Phase, nil
}

// startErrors finds every *runtime.StartError in err's tree (act joins the
// errors of several containers; errors.As would find only the first).
func startErrors(err error) []*runtime.StartError {
	var out []*runtime.StartError
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
		case *runtime.StartError:
			out = append(out, e)
		case interface{ Unwrap() []error }:
			for _, err := range e.Unwrap() {
				walk(err)
			}
		case interface{ Unwrap() error }:
			walk(e.Unwrap())
		}
	}
	walk(err)
	return out
}

// act carries out the plan. A failed container start is a
// *runtime.StartError in the returned error's tree.
func (s *Syncer) act(ctx context.Context, pod *corev1.Pod, rs *runtime.PodStatus, a *runtime.PodActions) error {
	if a.KillPod {
		if a.CreateSandbox && rs.LatestSandbox() != nil {
			s.podEvent(pod, corev1.EventTypeNormal, eventSandboxChanged, "Pod sandbox changed, it will be killed and re-created.")
		}
		if err := s.killPod(ctx, pod, rs, -1); err != nil {
			return err
		}
	}
	for id, info := range a.ContainersToKill {
		msg := info.Message
		if msg == "" {
			msg = "Stopping container " + info.Name
		}
		s.containerEvent(pod, info.Name, corev1.EventTypeNormal, eventKilling, "%s", msg)
		grace := gracePeriod(pod, -1)
		if info.GracePeriod != nil {
			grace = gracePeriod(pod, *info.GracePeriod)
		}
		if err := s.stopContainer(ctx, hookTarget{pod: pod, c: specOf(pod, info.Name), id: id, podIP: s.podIP(pod, rs)}, grace); err != nil {
			return fmt.Errorf("kill container %s (%s: %s) of pod %s: %w", info.Name, id, info.Reason, podRef(pod), err)
		}
	}
	if a.KillPod && !a.CreateSandbox {
		return nil // the pod is done: nothing to run
	}
	// The pod's cgroup and files are for the containers to start: none, no
	// set-up.
	starts := a.StartsAnything()
	var podCgroup string
	if starts {
		var err error
		if podCgroup, err = s.cfg.Cgroups.EnsurePod(ctx, pod); err != nil {
			return fmt.Errorf("ensure cgroup of pod %s: %w", podRef(pod), err)
		}
	}
	// The volumes are set up at every sync of a pod that runs, whatever the
	// plan: SetupPod also rewrites the configMap, secret, downwardAPI and
	// projected volumes whose content changed, so the running containers
	// see updated objects (upstream's periodic volume remount).
	mounts, err := s.cfg.Volumes.SetupPod(ctx, pod)
	if err != nil {
		s.podEvent(pod, corev1.EventTypeWarning, eventFailedMount, "MountVolume.SetUp failed: %v", err)
		return fmt.Errorf("set up volumes of pod %s: %w", podRef(pod), err)
	}
	if !starts {
		return nil
	}
	sb := sandboxInfo{id: a.SandboxID}
	// Containers with no status show ContainerCreating (PodInitializing
	// behind init containers) by status.Compute's default meanwhile.
	if a.CreateSandbox {
		if sb, err = s.createSandbox(ctx, pod, podCgroup, a.Attempt); err != nil {
			s.podEvent(pod, corev1.EventTypeWarning, eventFailedSandbox, "Failed to create pod sandbox: %v", err)
			return err
		}
	} else if cur := rs.LatestSandbox(); cur != nil {
		sb.ip = cur.IP
	}
	pc := podContext{pod: pod, sandbox: sb, podCgroup: podCgroup, volumes: mounts, rs: rs}
	if err := s.writePodFiles(&pc); err != nil {
		return err
	}
	// Ephemeral containers first, as upstream: a debugger must start even
	// when an init container cannot.
	var errs []error
	for _, i := range a.EphemeralContainersToStart {
		if err := s.startEphemeral(ctx, &pc, i); err != nil {
			errs = append(errs, err)
		}
	}
	if c := a.NextInitContainerToStart; c != nil {
		return errors.Join(append(errs, s.startContainer(ctx, &pc, c, true, ""))...)
	}
	for _, i := range a.ContainersToStart {
		if err := s.startContainer(ctx, &pc, &pod.Spec.Containers[i], false, ""); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func volumeSources(m map[string]volumes.Mount) map[string]runtime.VolumeSource {
	out := make(map[string]runtime.VolumeSource, len(m))
	for name, v := range m {
		out[name] = runtime.VolumeSource{HostPath: v.HostPath, ReadOnly: v.ReadOnly}
	}
	return out
}

// gracePeriod is override (seconds) when >= 0, else the pod's
// terminationGracePeriodSeconds (30 s by default).
func gracePeriod(pod *corev1.Pod, override int64) time.Duration {
	g := int64(30)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		g = *pod.Spec.TerminationGracePeriodSeconds
	}
	if override >= 0 {
		g = override
	}
	return time.Duration(g) * time.Second
}

func newNetworkID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return "nodelet-" + hex.EncodeToString(b)
}

func podNetwork(pod *corev1.Pod, id string) network.PodNetwork {
	p := network.PodNetwork{ID: id, Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID)}
	for _, c := range pod.Spec.Containers {
		for _, port := range c.Ports {
			if port.HostPort != 0 {
				p.PortMappings = append(p.PortMappings, network.PortMapping{
					HostPort: port.HostPort, ContainerPort: port.ContainerPort,
					Protocol: string(port.Protocol), HostIP: port.HostIP,
				})
			}
		}
	}
	return p
}

// podLogDir is the runtime's directory of the pod's logs.
func (s *Syncer) podLogDir(pod *corev1.Pod) string {
	return filepath.Dir(filepath.Dir(runtime.ContainerLogPath(s.cfg.LogRoot, pod.Namespace, pod.Name, string(pod.UID), "x", 0)))
}
