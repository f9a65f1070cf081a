package runtime

// Image-pull back-off (ImagePullBackOff): after a failed pull of a
// container's image, the next pull of the same image waits, so a missing
// image or an unreachable registry is not hammered on every sync. The
// record lives here; the plan (applyPullBackoff) decides from it which
// containers are held back, and the executor only reports pull outcomes.

import (
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Default back-off of image pulls (upstream's kubelet).
const (
	DefaultPullBackoffInitial = 10 * time.Second
	DefaultPullBackoffMax     = 5 * time.Minute
)

// PullBackoffFunc reports whether pulling image for a pod's container must
// still wait after a failed pull, and for how long from now.
// *PullBackoff implements it (InBackoff). It must not count anything: the
// plan may ask about a container it then does not start.
type PullBackoffFunc func(podUID types.UID, container, image string) (remaining time.Duration, inBackoff bool)

// PullBackoff records failed image pulls per pod container: after a failure
// the next pull of the same image waits Initial, then each further failure
// doubles the wait up to Max. A failure for another image (the spec
// changed), or one after more than twice Max without failures, starts over
// from Initial. Safe for concurrent use.
type PullBackoff struct {
	initial, max time.Duration
	now          func() time.Time

	mu      sync.Mutex
	entries map[backoffKey]*pullEntry
}

type pullEntry struct {
	image    string        // the image whose pull failed
	delay    time.Duration // the wait after the last failure
	failedAt time.Time     // when the last failure was recorded
}

// NewPullBackoff returns a pull back-off from initial to max; now is its
// clock (time.Now when nil).
func NewPullBackoff(initial, max time.Duration, now func() time.Time) *PullBackoff {
	if now == nil {
		now = time.Now
	}
	return &PullBackoff{initial: initial, max: max, now: now, entries: map[backoffKey]*pullEntry{}}
}

// Failed records a failed pull of image for the container, starting or
// doubling its back-off.
func (b *PullBackoff) Failed(uid types.UID, container, image string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	key := backoffKey{uid, container}
	now := b.now()
	e, ok := b.entries[key]
	if !ok || e.image != image || now.Sub(e.failedAt) > 2*b.max {
		b.entries[key] = &pullEntry{image: image, delay: b.initial, failedAt: now}
		return
	}
	e.delay = min(2*e.delay, b.max)
	e.failedAt = now
}

// Succeeded forgets the container's failures: its image is there now.
func (b *PullBackoff) Succeeded(uid types.UID, container string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.entries, backoffKey{uid, container})
}

// InBackoff is a PullBackoffFunc: the pull of image is held back while the
// last failure, of the same image, is more recent than its delay.
func (b *PullBackoff) InBackoff(uid types.UID, container, image string) (time.Duration, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[backoffKey{uid, container}]
	if !ok || e.image != image {
		return 0, false
	}
	remaining := e.failedAt.Add(e.delay).Sub(b.now())
	if remaining <= 0 {
		return 0, false
	}
	return remaining, true
}

// Forget drops the records of every container of a pod (the pod is gone).
func (b *PullBackoff) Forget(uid types.UID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.entries {
		if k.uid == uid {
			delete(b.entries, k)
		}
	}
}

// GC drops records whose last failure is more than twice the maximum delay
// old (the next failure would start over anyway).
func (b *PullBackoff) GC() {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	for k, e := range b.entries {
		if now.Sub(e.failedAt) > 2*b.max {
			delete(b.entries, k)
		}
	}
}

// applyPullBackoff holds back the containers planned to start whose image
// pull is in back-off, recording ImagePullBackOff. It runs after the crash
// back-off: a container held by both shows CrashLoopBackOff, as upstream
// checks the restart back-off before pulling. Only one init container is
// ever planned, so holding it back starts nothing after it.
func applyPullBackoff(pod *corev1.Pod, pullBackoff PullBackoffFunc, a *PodActions) {
	if pullBackoff == nil {
		return
	}
	held := func(c *corev1.Container) bool {
		remaining, wait := pullBackoff(pod.UID, c.Name, c.Image)
		if !wait {
			return false
		}
		a.Waiting[c.Name] = corev1.ContainerStateWaiting{
			Reason:  ReasonImagePullBackOff,
			Message: fmt.Sprintf("Back-off pulling image %q", c.Image),
		}
		a.retryAfter(remaining)
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
	keptEph := a.EphemeralContainersToStart[:0]
	for _, i := range a.EphemeralContainersToStart {
		if !held(EphemeralContainer(pod, i)) {
			keptEph = append(keptEph, i)
		}
	}
	a.EphemeralContainersToStart = keptEph
}

// retryAfter keeps in RetryAfter the soonest positive delay after which a
// held-back container may start.
func (a *PodActions) retryAfter(d time.Duration) {
	if d > 0 && (a.RetryAfter == 0 || d < a.RetryAfter) {
		a.RetryAfter = d
	}
}
