package prober

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// ProbeType is the kind of a container probe.
type ProbeType int

// The probe types, in the order a container's probes are gated: liveness
// and readiness do not run until startup has succeeded.
const (
	Liveness ProbeType = iota
	Readiness
	Startup
	numProbeTypes
)

// String is the type as upstream's events name it ("Liveness probe
// failed: ...").
func (t ProbeType) String() string {
	switch t {
	case Liveness:
		return "Liveness"
	case Readiness:
		return "Readiness"
	case Startup:
		return "Startup"
	default:
		return "Unknown"
	}
}

// spec returns the container's probe of this type, or nil.
func (t ProbeType) spec(c *corev1.Container) *corev1.Probe {
	switch t {
	case Liveness:
		return c.LivenessProbe
	case Readiness:
		return c.ReadinessProbe
	case Startup:
		return c.StartupProbe
	default:
		return nil
	}
}

// Result is the outcome of one probe, as upstream's pkg/probe reports it.
type Result int

const (
	// Unknown: the probe could not be run (it is thrown away when it
	// comes with an error) or has no result yet.
	Unknown Result = iota
	Success
	// Warning is a success worth an event: an HTTP redirect that was not
	// followed.
	Warning
	Failure
)

// String is upstream's spelling, used in "... probe errored and resulted
// in unknown state: ..." events.
func (r Result) String() string {
	switch r {
	case Success:
		return "success"
	case Warning:
		return "warning"
	case Failure:
		return "failure"
	default:
		return "unknown"
	}
}

// metricLabel is the result as prober_probe_total's result label spells
// it (a warning is a success there, as upstream's prober makes it).
func (r Result) metricLabel() string {
	switch r {
	case Success, Warning:
		return "successful"
	case Failure:
		return "failed"
	default:
		return "unknown"
	}
}

// Event reasons and kill reasons of upstream's kubelet.
const (
	ReasonUnhealthy     = "Unhealthy"     // event of a failed or errored probe
	ReasonProbeWarning  = "ProbeWarning"  // event of a probe's warning
	ReasonLivenessProbe = "LivenessProbe" // kill reason of a liveness failure
	ReasonStartupProbe  = "StartupProbe"  // kill reason of a startup failure
)

// DefaultUserAgent is the User-Agent of HTTP and gRPC probes:
// "kube-probe/<major>.<minor>" of the Kubernetes version the node reports.
const DefaultUserAgent = "kube-probe/1.37"

// The API server's defaults of a probe, and upstream's limits.
const (
	defaultTimeoutSeconds  = 1
	defaultPeriodSeconds   = 10
	defaultSuccessThresh   = 1
	defaultFailureThresh   = 3
	maxProbeRetries        = 3         // attempts of a probe that errors
	maxOutputLength        = 10 * 1024 // exec output and HTTP body kept
	containerIDSchemeDelim = "://"
)

// ContainerState is what the runtime says of one container of a pod; the
// caller passes every container it knows of (app containers and sidecars,
// i.e. init containers with restartPolicy Always) to UpdatePod.
type ContainerState struct {
	Name string
	// ID is the runtime's id of this container instance, with or without
	// a "containerd://" scheme. A new ID is a new instance: its probes
	// start over.
	ID      string
	Running bool
	// StartedAt is when the instance started; initialDelaySeconds counts
	// from it (zero: from the first UpdatePod that saw it running).
	StartedAt time.Time
}

// ContainerResults are the probe results of one running container
// instance.
type ContainerResults struct {
	// ContainerID is the instance the results are for (as given to
	// UpdatePod); results of another instance do not apply.
	ContainerID string
	// Started: no startup probe, or it has succeeded.
	Started bool
	// Ready: started, and no readiness probe or its last thresholded result
	// is success (false before its first result).
	Ready bool
	// Failed is set once the liveness or the startup probe failed
	// failureThreshold times in a row: the container must be killed (and
	// restarted as its restart policy says). It stays set for this
	// instance; the probe is not run again until a new instance runs.
	Failed *ProbeFailure
}

// ProbeFailure says why a container must be killed.
type ProbeFailure struct {
	Probe ProbeType // Liveness or Startup
	// Reason is ReasonLivenessProbe or ReasonStartupProbe.
	Reason string
	// Message is upstream's kill message, "Container app failed liveness
	// probe" ("Init container ..." for a sidecar); upstream appends ", will
	// be restarted" when the container is restarted.
	Message string
	// Output is the last probe's output ("HTTP probe failed with
	// statuscode: 500").
	Output string
	// TerminationGracePeriodSeconds is the probe's own grace period for the
	// kill; nil means the pod's.
	TerminationGracePeriodSeconds *int64
}

// trimID drops a "scheme://" prefix from a container ID.
func trimID(id string) string {
	if i := strings.Index(id, containerIDSchemeDelim); i >= 0 {
		return id[i+len(containerIDSchemeDelim):]
	}
	return id
}

// withDefaults returns a copy of p with the API server's defaults applied
// to the zero fields (static pods are not defaulted by an API server).
func withDefaults(p *corev1.Probe) *corev1.Probe {
	c := p.DeepCopy()
	if c.TimeoutSeconds <= 0 {
		c.TimeoutSeconds = defaultTimeoutSeconds
	}
	if c.PeriodSeconds <= 0 {
		c.PeriodSeconds = defaultPeriodSeconds
	}
	if c.SuccessThreshold <= 0 {
		c.SuccessThreshold = defaultSuccessThresh
	}
	if c.FailureThreshold <= 0 {
		c.FailureThreshold = defaultFailureThresh
	}
	return c
}
