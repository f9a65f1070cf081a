package prober

// The results of the probes of the running container instances. They are
// kept per instance and start over with a new instance: readiness false
// until its first result, liveness success until it fails, startup
// unknown (not started) until it succeeds. All under Manager.mu.

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// podState is what the manager knows of one pod.
type podState struct {
	pod        *corev1.Pod
	ip         string
	containers map[string]*entry // running instances by container name
}

// entry holds the probe results of one running container instance.
type entry struct {
	uid       types.UID
	givenID   string // the ID as given to UpdatePod
	id        string // without scheme
	container *corev1.Container
	sidecar   bool // a restartable init container
	startedAt time.Time

	has    [numProbeTypes]bool   // the container has this probe
	value  [numProbeTypes]Result // the thresholded result
	output [numProbeTypes]string // the output of the result's last probe
	// owner is the worker whose results are kept; a stopped worker's
	// late results are ignored.
	owner [numProbeTypes]*worker
	// spawned: a worker was started for this probe (or none is to be).
	spawned [numProbeTypes]bool
}

func newEntry(uid types.UID, c *corev1.Container, sidecar bool, cs ContainerState, now time.Time) *entry {
	e := &entry{
		uid:       uid,
		givenID:   cs.ID,
		id:        trimID(cs.ID),
		container: c.DeepCopy(),
		sidecar:   sidecar,
		startedAt: cs.StartedAt,
	}
	if e.startedAt.IsZero() {
		e.startedAt = now
	}
	e.value = [numProbeTypes]Result{Liveness: Success, Readiness: Failure, Startup: Unknown}
	for t := ProbeType(0); t < numProbeTypes; t++ {
		e.has[t] = t.spec(c) != nil
	}
	return e
}

// started: no startup probe, or it succeeded.
func (e *entry) started() bool {
	return !e.has[Startup] || e.value[Startup] == Success
}

func (e *entry) results() ContainerResults {
	r := ContainerResults{ContainerID: e.givenID, Started: e.started()}
	r.Ready = r.Started && (!e.has[Readiness] || e.value[Readiness] == Success)
	switch {
	case e.has[Liveness] && e.value[Liveness] == Failure:
		r.Failed = e.failure(Liveness, ReasonLivenessProbe, "liveness")
	case e.has[Startup] && e.value[Startup] == Failure:
		r.Failed = e.failure(Startup, ReasonStartupProbe, "startup")
	}
	return r
}

func (e *entry) failure(t ProbeType, reason, kind string) *ProbeFailure {
	what := "Container"
	if e.sidecar {
		what = "Init container"
	}
	f := &ProbeFailure{
		Probe:   t,
		Reason:  reason,
		Message: fmt.Sprintf("%s %s failed %s probe", what, e.container.Name, kind),
		Output:  e.output[t],
	}
	if g := t.spec(e.container).TerminationGracePeriodSeconds; g != nil {
		v := *g
		f.TerminationGracePeriodSeconds = &v
	}
	return f
}

// Results returns the probe results of the pod's running containers (app
// containers and sidecars) by container name, as of the last UpdatePod;
// a container without probes is started and ready. A container that is
// missing is not running (or unknown to the manager).
func (m *Manager) Results(podUID types.UID) map[string]ContainerResults {
	m.mu.Lock()
	defer m.mu.Unlock()
	ps := m.pods[podUID]
	if ps == nil {
		return nil
	}
	out := make(map[string]ContainerResults, len(ps.containers))
	for name, e := range ps.containers {
		out[name] = e.results()
	}
	return out
}

// Readiness reports whether the running container instance containerID
// (with or without its "containerd://" scheme) is ready; known is false
// for an instance the manager does not know. It has the shape of
// status.ProbeFunc.
func (m *Manager) Readiness(containerID string) (ready, known bool) {
	r, ok := m.byContainerID(containerID)
	return r.Ready, ok
}

// Startup reports whether the running container instance containerID has
// started (no startup probe, or it succeeded); known is false for an
// instance the manager does not know. It has the shape of
// status.ProbeFunc.
func (m *Manager) Startup(containerID string) (started, known bool) {
	r, ok := m.byContainerID(containerID)
	return r.Started, ok
}

func (m *Manager) byContainerID(id string) (ContainerResults, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.byID[trimID(id)]
	if e == nil {
		return ContainerResults{}, false
	}
	return e.results(), true
}

// setResult records a worker's thresholded result. When it changes the
// result, the pod goes to Updates (after the lock is released); when startup
// succeeds, the readiness worker probes at once.
func (m *Manager) setResult(w *worker, r Result, output string) {
	m.mu.Lock()
	e := m.byID[w.containerID]
	if e == nil || e.owner[w.typ] != w {
		m.mu.Unlock()
		return
	}
	changed := e.value[w.typ] != r
	e.value[w.typ] = r
	e.output[w.typ] = output
	if changed && w.typ == Startup && r == Success {
		if rw := e.owner[Readiness]; rw != nil {
			rw.trigger()
		}
	}
	m.mu.Unlock()
	if changed {
		select {
		case m.updates <- w.uid:
		case <-m.ctx.Done(): // stopped: nobody syncs any more
		}
	}
}

// snapshot returns what a worker's next probe needs, under the lock;
// ok is false once the worker has been replaced or stopped.
func (m *Manager) snapshot(w *worker) (tg target, started bool, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.byID[w.containerID]
	ps := m.pods[w.uid]
	if e == nil || ps == nil || e.owner[w.typ] != w {
		return target{}, false, false
	}
	return target{pod: ps.pod, container: e.container, containerID: e.id, podIP: ps.ip}, e.started(), true
}
