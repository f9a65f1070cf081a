package runtime

// The plan of a pod sync: from the pod spec and what the runtime reports,
// decide what to kill and what to start, as upstream's kuberuntime
// computePodActions does. Pure: the executor carries the plan out.

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Reasons for killing a container.
const (
	KillReasonUnknown     = "Unknown"     // state unknown: kill before restarting
	KillReasonSpecChanged = "SpecChanged" // the container's hash changed
	KillReasonUnhealthy   = "Unhealthy"   // a liveness or startup probe failed
)

// Unhealthy is a running container that a liveness or startup probe
// failed: it is killed and restarted as the restart policy says.
type Unhealthy struct {
	// Message is the event's, e.g. "Container app failed liveness probe".
	Message string
	// GracePeriod, when set, is the probe's terminationGracePeriodSeconds.
	GracePeriod *int64
}

// Waiting reasons of the containers the plan holds back.
const (
	// ReasonCrashLoopBackOff: the container's restart is delayed by its
	// back-off (BackoffFunc).
	ReasonCrashLoopBackOff = "CrashLoopBackOff"
	// ReasonImagePullBackOff: the pull of the container's image is delayed
	// after a failed one (PullBackoffFunc).
	ReasonImagePullBackOff = "ImagePullBackOff"
)

// BackoffFunc reports whether the restart of a pod's container, whose
// newest instance finished at lastFinishedAt, must still wait, and the
// current back-off delay. *Backoff implements it (InBackoff).
type BackoffFunc func(podUID types.UID, container string, lastFinishedAt time.Time) (delay time.Duration, inBackoff bool)

// KillInfo says why a container is to be killed.
type KillInfo struct {
	Name    string // the container's name in the pod spec
	Reason  string
	Message string
	// GracePeriod, when set, overrides the pod's grace period (seconds).
	GracePeriod *int64
}

// PodActions is the plan of one pod sync.
type PodActions struct {
	// KillPod stops every container and the sandbox (SandboxID) first.
	KillPod bool
	// CreateSandbox creates a new sandbox with Attempt as its attempt.
	CreateSandbox bool
	// SandboxID is the sandbox to use, or, with KillPod, to kill ("" if none).
	SandboxID string
	Attempt   uint32
	// NextInitContainerToStart is the init container to run next, also given
	// by its index in InitContainersToStart.
	NextInitContainerToStart *corev1.Container
	InitContainersToStart    []int
	// ContainersToStart are indexes in pod.Spec.Containers.
	ContainersToStart []int
	// EphemeralContainersToStart are indexes in pod.Spec.EphemeralContainers:
	// those never started (they are never restarted), in a running sandbox.
	EphemeralContainersToStart []int
	// ContainersToKill maps a container ID to the reason of its kill.
	ContainersToKill map[string]KillInfo
	// Waiting gives, per container name, why a container that should run
	// cannot be started now (CrashLoopBackOff, ImagePullBackOff).
	Waiting map[string]corev1.ContainerStateWaiting
	// RetryAfter is when the pod should be synced again for a container in
	// back-off to start (0: no back-off pending).
	RetryAfter time.Duration
}

// StartsAnything reports whether the plan creates a sandbox or starts a
// container (init or app): only then does the executor prepare what a new
// container needs (the pod's cgroup, its hosts and resolv.conf).
func (a *PodActions) StartsAnything() bool {
	return a.CreateSandbox || a.NextInitContainerToStart != nil || len(a.ContainersToStart) > 0 ||
		len(a.EphemeralContainersToStart) > 0
}

// ContainerHash identifies the parts of a container spec that, when they
// change, make the running container obsolete. As upstream since 1.31,
// those are the name and the image (the rest of a pod's containers is
// immutable). The runtime may record it on containers.
func ContainerHash(c *corev1.Container) string {
	return hashNameImage(c.Name, c.Image)
}

func hashNameImage(name, image string) string {
	b, _ := json.Marshal(struct {
		Name  string `json:"name"`
		Image string `json:"image"`
	}{name, image})
	h := fnv.New32a()
	h.Write(b)
	return strconv.FormatUint(uint64(h.Sum32()), 16)
}

func containerChanged(c *corev1.Container, cs *ContainerStatus) bool {
	return ContainerHash(c) != hashNameImage(cs.Name, cs.Image)
}

// SandboxChanged reports whether the pod needs a new sandbox, the attempt
// the new (or current) sandbox has and the ID of the latest sandbox, as
// upstream's PodSandboxChanged: none exists, more than one or none is
// running, the newest is not running, its network mode differs from the
// pod's (host network: no NetNSPath) or it has no IP.
func SandboxChanged(pod *corev1.Pod, status *PodStatus) (changed bool, attempt uint32, sandboxID string) {
	sb := status.LatestSandbox()
	if sb == nil {
		return true, 0, ""
	}
	running := 0
	for _, s := range status.Sandboxes {
		if s.State == StateRunning {
			running++
		}
	}
	if running > 1 || sb.State != StateRunning {
		return true, sb.Attempt + 1, sb.ID
	}
	if pod.Spec.HostNetwork != (sb.NetNSPath == "") {
		return true, sb.Attempt + 1, sb.ID
	}
	if !pod.Spec.HostNetwork && sb.IP == "" {
		return true, sb.Attempt + 1, sb.ID
	}
	return false, sb.Attempt, sb.ID
}

// PlanInputs is everything a sync's plan depends on besides the pod spec.
// New inputs (probe results, ...) join here rather than as arguments.
type PlanInputs struct {
	// Status is the runtime's view of the pod (nil: nothing exists yet).
	Status *PodStatus
	// Now is the time of the plan.
	Now time.Time
	// Backoff tells whether a container's restart must wait (nil: never).
	Backoff BackoffFunc
	// PullBackoff tells whether a container's image pull must wait after
	// a failed one (nil: never).
	PullBackoff PullBackoffFunc
	// Unhealthy are the running containers probes failed, by container ID.
	Unhealthy map[string]Unhealthy
}

// ComputePodActions plans one sync of pod from in. It is pure: the same
// pod and inputs give the same plan.
func ComputePodActions(pod *corev1.Pod, in PlanInputs) PodActions {
	status, now, backoff := in.Status, in.Now, in.Backoff
	if status == nil {
		status = &PodStatus{}
	}
	create, attempt, sandboxID := SandboxChanged(pod, status)
	a := PodActions{
		KillPod:           create,
		CreateSandbox:     create,
		SandboxID:         sandboxID,
		Attempt:           attempt,
		ContainersToStart: []int{},
		ContainersToKill:  map[string]KillInfo{},
		Waiting:           map[string]corev1.ContainerStateWaiting{},
	}
	if create {
		planNewSandbox(pod, status, &a)
	} else {
		// As upstream: ephemeral containers start even before the pod is
		// initialized, and only once.
		for i, ec := range pod.Spec.EphemeralContainers {
			if status.LatestContainer(ec.Name) == nil {
				a.EphemeralContainersToStart = append(a.EphemeralContainersToStart, i)
			}
		}
		if planInit(pod, status, &a) {
			planContainers(pod, status, in.Unhealthy, &a)
		}
	}
	applyBackoff(pod, status, now, backoff, &a)
	applyPullBackoff(pod, in.PullBackoff, &a)
	return a
}

// planNewSandbox: everything restarts from the first init container, unless
// the pod is done (or being deleted) and needs no sandbox any more.
func planNewSandbox(pod *corev1.Pod, status *PodStatus, a *PodActions) {
	if pod.DeletionTimestamp != nil ||
		(!shouldRestartOnFailure(pod) && a.Attempt != 0 && len(status.Containers) != 0) {
		a.CreateSandbox = false
		return
	}
	var toStart []int
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if pod.Spec.RestartPolicy == corev1.RestartPolicyOnFailure && containerSucceeded(c, status) {
			continue
		}
		toStart = append(toStart, i)
	}
	if len(toStart) == 0 {
		if _, _, initialized := nextInitContainer(pod, status); initialized {
			a.CreateSandbox = false
			return
		}
	}
	if len(pod.Spec.InitContainers) > 0 {
		a.NextInitContainerToStart = &pod.Spec.InitContainers[0]
		a.InitContainersToStart = []int{0}
		return
	}
	a.ContainersToStart = toStart
}

// planInit plans the init containers and reports whether they are all done
// (so that the app containers are to be planned).
func planInit(pod *corev1.Pod, status *PodStatus, a *PodActions) bool {
	last, next, done := nextInitContainer(pod, status)
	if done {
		return true
	}
	if next == nil {
		return false // an init container is running
	}
	if last != nil && initFailed(last) && !shouldRestartOnFailure(pod) {
		a.KillPod = true
		return false
	}
	if last != nil && last.State == StateUnknown {
		a.ContainersToKill[last.ID] = KillInfo{
			Name:    next.Name,
			Reason:  KillReasonUnknown,
			Message: fmt.Sprintf("Init container is in %q state, try killing it before restart", last.State),
		}
	}
	a.NextInitContainerToStart = next
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == next.Name {
			a.InitContainersToStart = []int{i}
		}
	}
	return false
}

// planContainers starts the app containers that are not running and may
// be (re)started, kills those whose spec changed (to restart them) and
// kills the pod when nothing is left to run.
func planContainers(pod *corev1.Pod, status *PodStatus, unhealthy map[string]Unhealthy, a *PodActions) {
	keep := 0
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		cs := status.LatestContainer(c.Name)
		if cs == nil || cs.State != StateRunning {
			if !shouldContainerBeRestarted(c, pod, status) {
				continue
			}
			a.ContainersToStart = append(a.ContainersToStart, i)
			if cs != nil && cs.State == StateUnknown {
				a.ContainersToKill[cs.ID] = KillInfo{
					Name:    c.Name,
					Reason:  KillReasonUnknown,
					Message: fmt.Sprintf("Container is in %q state, try killing it before restart", cs.State),
				}
			}
			continue
		}
		if u, ok := unhealthy[cs.ID]; ok {
			a.ContainersToKill[cs.ID] = KillInfo{Name: c.Name, Reason: KillReasonUnhealthy, Message: u.Message, GracePeriod: u.GracePeriod}
			if pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
				a.ContainersToStart = append(a.ContainersToStart, i)
			}
			continue
		}
		if !containerChanged(c, cs) {
			keep++
			continue
		}
		// Restart regardless of the restart policy: the spec changed.
		a.ContainersToStart = append(a.ContainersToStart, i)
		a.ContainersToKill[cs.ID] = KillInfo{
			Name:    c.Name,
			Reason:  KillReasonSpecChanged,
			Message: fmt.Sprintf("Container %s definition changed, will be restarted", c.Name),
		}
	}
	if keep == 0 && len(a.ContainersToStart) == 0 {
		a.KillPod = true
	}
}

// nextInitContainer is upstream's findNextInitContainerToRun: the status of
// the last failed init container (if any), the init container to run next,
// and whether initialization is done.
func nextInitContainer(pod *corev1.Pod, status *PodStatus) (last *ContainerStatus, next *corev1.Container, done bool) {
	inits := pod.Spec.InitContainers
	if len(inits) == 0 {
		return nil, nil, true
	}
	// A running app container means initialization completed before, even
	// if the init containers were removed since.
	for i := range pod.Spec.Containers {
		if cs := status.LatestContainer(pod.Spec.Containers[i].Name); cs != nil && cs.State == StateRunning {
			return nil, nil, true
		}
	}
	for i := len(inits) - 1; i >= 0; i-- {
		if cs := status.LatestContainer(inits[i].Name); cs != nil && initFailed(cs) {
			return cs, &inits[i], false
		}
	}
	for i := len(inits) - 1; i >= 0; i-- {
		cs := status.LatestContainer(inits[i].Name)
		if cs == nil {
			continue
		}
		if cs.State == StateRunning {
			return nil, nil, false
		}
		if cs.State == StateExited {
			if i == len(inits)-1 {
				return nil, nil, true
			}
			return nil, &inits[i+1], false
		}
	}
	return nil, &inits[0], false
}

func initFailed(cs *ContainerStatus) bool {
	return (cs.State == StateExited && cs.ExitCode != 0) || cs.State == StateUnknown
}

func shouldRestartOnFailure(pod *corev1.Pod) bool {
	return pod.Spec.RestartPolicy != corev1.RestartPolicyNever
}

func containerSucceeded(c *corev1.Container, status *PodStatus) bool {
	cs := status.LatestContainer(c.Name)
	return cs != nil && cs.State == StateExited && cs.ExitCode == 0
}

// shouldContainerBeRestarted is upstream's ShouldContainerBeRestarted.
func shouldContainerBeRestarted(c *corev1.Container, pod *corev1.Pod, status *PodStatus) bool {
	return ShouldRestart(pod, status.LatestContainer(c.Name))
}

// ShouldRestart reports whether a container whose newest instance is cs
// (nil: never created) is to be (re)started: never for a pod being
// deleted; always when never started or in an unknown state; otherwise
// per restartPolicy.
func ShouldRestart(pod *corev1.Pod, cs *ContainerStatus) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	if cs == nil {
		return true
	}
	switch cs.State {
	case StateRunning:
		return false
	case StateUnknown, StateCreated:
		return true
	}
	switch pod.Spec.RestartPolicy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return cs.ExitCode != 0
	}
	return true
}

// applyBackoff holds back the containers planned to start whose newest
// exited instance is still in back-off, recording CrashLoopBackOff.
func applyBackoff(pod *corev1.Pod, status *PodStatus, now time.Time, backoff BackoffFunc, a *PodActions) {
	if backoff == nil {
		return
	}
	held := func(c *corev1.Container) bool {
		exited := latestExited(status, c.Name)
		if exited == nil {
			return false
		}
		delay, wait := backoff(pod.UID, c.Name, exited.FinishedAt)
		if !wait {
			return false
		}
		a.Waiting[c.Name] = corev1.ContainerStateWaiting{
			Reason: ReasonCrashLoopBackOff,
			Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)",
				delay, c.Name, pod.Name, pod.Namespace, pod.UID),
		}
		a.retryAfter(exited.FinishedAt.Add(delay).Sub(now))
		return true
	}
	if a.NextInitContainerToStart != nil && held(a.NextInitContainerToStart) {
		a.NextInitContainerToStart = nil
		a.InitContainersToStart = nil
	}
	kept := a.ContainersToStart[:0]
	for _, i := range a.ContainersToStart {
		if !held(&pod.Spec.Containers[i]) {
			kept = append(kept, i)
		}
	}
	a.ContainersToStart = kept
}

func latestExited(status *PodStatus, name string) *ContainerStatus {
	for i := range status.Containers {
		if cs := &status.Containers[i]; cs.Name == name && cs.State == StateExited {
			return cs
		}
	}
	return nil
}

// Default back-off of container restarts (upstream's kubelet).
const (
	DefaultBackoffInitial = 10 * time.Second
	DefaultBackoffMax     = 5 * time.Minute
)

// Backoff is the restart back-off of containers (CrashLoopBackOff): the
// first restart is immediate, then each failure waits twice as long as the
// previous one, from Initial up to Max; a container that ran for more than
// twice Max before failing starts over. Safe for concurrent use.
type Backoff struct {
	initial, max time.Duration
	now          func() time.Time

	mu      sync.Mutex
	entries map[backoffKey]*backoffEntry
}

type backoffKey struct {
	uid  types.UID
	name string
}

type backoffEntry struct {
	delay      time.Duration // the delay applying to the next failure
	lastUpdate time.Time     // when the last restart was allowed
	counted    time.Time     // the finish time of the failure already allowed
}

// NewBackoff returns a back-off from initial to max; now is its clock
// (time.Now when nil).
func NewBackoff(initial, max time.Duration, now func() time.Time) *Backoff {
	if now == nil {
		now = time.Now
	}
	return &Backoff{initial: initial, max: max, now: now, entries: map[backoffKey]*backoffEntry{}}
}

// InBackoff is a BackoffFunc. When the restart is allowed, it counts the
// failure (once per lastFinishedAt: asking again about the same failure
// gives the same answer).
func (b *Backoff) InBackoff(uid types.UID, name string, lastFinishedAt time.Time) (time.Duration, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	key := backoffKey{uid, name}
	now := b.now()
	e, ok := b.entries[key]
	if ok && lastFinishedAt.Equal(e.counted) {
		return 0, false
	}
	expired := ok && lastFinishedAt.Sub(e.lastUpdate) > 2*b.max
	if ok && !expired && now.Sub(lastFinishedAt) < e.delay {
		return e.delay, true
	}
	switch {
	case !ok || expired:
		e = &backoffEntry{delay: b.initial}
		b.entries[key] = e
	default:
		e.delay = min(2*e.delay, b.max)
	}
	e.lastUpdate, e.counted = now, lastFinishedAt
	return 0, false
}

// Forget drops the back-off of every container of a pod.
func (b *Backoff) Forget(uid types.UID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.entries {
		if k.uid == uid {
			delete(b.entries, k)
		}
	}
}

// GC drops entries not updated for more than twice the maximum delay
// (they would start over anyway).
func (b *Backoff) GC() {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	for k, e := range b.entries {
		if now.Sub(e.lastUpdate) > 2*b.max {
			delete(b.entries, k)
		}
	}
}
