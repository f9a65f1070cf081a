package podlifecycle

import (
	"log/slog"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/admission"
	"github.com/nodelet/nodelet/podworkers"
)

// Rejecter records the terminal status of a pod refused by admission
// (*status.Manager).
type Rejecter interface {
	SetPodStatus(pod *corev1.Pod, st corev1.PodStatus)
	TerminatePod(pod *corev1.Pod)
}

// AdmitterConfig configures an Admitter; every field but Log is required.
type AdmitterConfig struct {
	// Handler decides (admission.Chain: pressure, resources, host ports).
	Handler admission.Handler
	// Lifecycle is the pod workers' latest snapshot (Board.Lifecycle).
	Lifecycle func() podworkers.Lifecycle
	// Pods are the node's pods as the API has them (the informer's).
	Pods   func() []*corev1.Pod
	Status Rejecter
	Log    *slog.Logger
}

// Admitter decides, once per pod, whether a pod new to the node may run,
// as upstream's canAdmitPod: pods the workers already know (running,
// terminating or finished) and pods being deleted or in a terminal phase
// need no decision; a new pod must fit next to the pods that are active
// now, or it is rejected: Failed with the handler's reason, for good.
// Decisions are serialized, so two new pods never both take the last room.
type Admitter struct {
	cfg AdmitterConfig

	mu       sync.Mutex
	rejected map[types.UID]bool
}

// NewAdmitter returns an Admitter with no rejection remembered.
func NewAdmitter(cfg AdmitterConfig) *Admitter {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Admitter{cfg: cfg, rejected: map[types.UID]bool{}}
}

// Admitted tells whether the pod may go to its worker. A refused pod's
// status is written Failed and terminal the first time.
func (a *Admitter) Admitted(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
		return true // the workers stop or forget it
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.rejected[p.UID] {
		return false
	}
	life := a.cfg.Lifecycle()
	if life.Known(p.UID) {
		return true
	}
	var others []*corev1.Pod
	for _, o := range a.cfg.Pods() {
		if life.Active(o.UID) {
			others = append(others, o)
		}
	}
	r := a.cfg.Handler.Admit(admission.Attributes{Pod: p, Admitted: others})
	if r.Admit {
		return true
	}
	a.rejected[p.UID] = true
	a.cfg.Log.Info("pod rejected", "pod", podRef(p), "reason", r.Reason, "message", r.Message)
	st := p.Status.DeepCopy()
	st.Phase, st.Reason, st.Message = corev1.PodFailed, r.Reason, r.Message
	a.cfg.Status.SetPodStatus(p, *st)
	a.cfg.Status.TerminatePod(p)
	return false
}

// Forget drops what is remembered of a pod gone from the API.
func (a *Admitter) Forget(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.rejected, uid)
}
