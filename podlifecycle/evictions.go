package podlifecycle

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/eviction"
	"github.com/nodelet/nodelet/podworkers"
)

// Evictions remembers the pods the eviction manager evicted until their
// containers are stopped: the status computed from the stopped containers
// would otherwise replace the Failed/Evicted one upstream leaves. It is
// the Syncer's EvictedStatus; an Evictor adds to it.
type Evictions struct {
	mu    sync.Mutex
	byUID map[types.UID]eviction.Eviction
}

// NewEvictions returns an empty record.
func NewEvictions() *Evictions {
	return &Evictions{byUID: map[types.UID]eviction.Eviction{}}
}

func (e *Evictions) add(ev eviction.Eviction) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.byUID[ev.Pod.UID] = ev
}

// FinalStatus is the evicted pod's status made from current, and forgets
// the pod (its termination is over); ok is false for pods not evicted.
func (e *Evictions) FinalStatus(pod *corev1.Pod, current corev1.PodStatus) (corev1.PodStatus, bool) {
	e.mu.Lock()
	ev, ok := e.byUID[pod.UID]
	delete(e.byUID, pod.UID)
	e.mu.Unlock()
	if !ok {
		return corev1.PodStatus{}, false
	}
	return ev.Status(current, metav1.Now()), true
}

// PodUpdater hands updates to the pod workers (*podworkers.Workers).
type PodUpdater interface {
	Update(opts podworkers.UpdateOptions)
}

// EvictionStatus reads and sets a pod's desired status (*status.Manager).
type EvictionStatus interface {
	GetPodStatus(uid types.UID) (corev1.PodStatus, bool)
	SetPodStatus(pod *corev1.Pod, st corev1.PodStatus)
}

// Evictor carries out the eviction manager's decisions (its Evict), as
// upstream's evictPod: an event on the pod, its status Failed/Evicted with
// a DisruptionTarget condition (written as soon as the status manager may;
// the phase once the containers are stopped, through Evictions), and a
// kill with the eviction's grace period through the pod worker.
type Evictor struct {
	Evictions *Evictions
	Status    EvictionStatus
	Workers   PodUpdater
	Recorder  EventRecorder // optional
}

// Evict evicts e.Pod; it returns once the kill is requested.
func (v *Evictor) Evict(e eviction.Eviction) {
	v.Evictions.add(e)
	current, ok := v.Status.GetPodStatus(e.Pod.UID)
	if !ok {
		current = e.Pod.Status
	}
	v.Status.SetPodStatus(e.Pod, e.Status(current, metav1.NewTime(time.Now())))
	if v.Recorder != nil {
		v.Recorder.Eventf(PodReference(e.Pod, ""), corev1.EventTypeWarning, eviction.Reason, "%s", e.Message)
	}
	grace := e.GracePeriod
	v.Workers.Update(podworkers.UpdateOptions{Pod: e.Pod, Kind: podworkers.Kill, GracePeriod: &grace})
}

// ActivePods are the eviction candidates among pods: those with a worker
// that are not being stopped, not being deleted and not finished.
func ActivePods(pods []*corev1.Pod, life podworkers.Lifecycle) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if !life.Active(p.UID) || p.DeletionTimestamp != nil ||
			p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			continue
		}
		out = append(out, p)
	}
	return out
}
