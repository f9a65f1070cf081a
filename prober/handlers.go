package prober

// The probe handlers: one run of a container's probe (exec, httpGet,
// tcpSocket or grpc), retried when it errors, and the events upstream
// records for it. The handlers keep no state between runs.

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// target is what one probe run is about.
type target struct {
	pod       *corev1.Pod
	container *corev1.Container
	// containerID is the runtime's id, without a scheme (for Exec).
	containerID string
	// podIP is the default host of httpGet and tcpSocket probes and the
	// host of grpc probes.
	podIP string
}

// handlers run probes with the dependencies of the Config.
type handlers struct {
	exec      ExecFunc
	dial      DialFunc
	transport http.RoundTripper
	userAgent string
	record    func(pod *corev1.Pod, container, eventtype, reason, message string)
	log       *slog.Logger
}

// probe runs the probe p (of type t) of the target, records upstream's
// Unhealthy and ProbeWarning events, and returns Success or Failure with
// the probe's output. A non-nil error means the probe could not be run
// (after maxProbeRetries attempts): the caller throws the result away, as
// upstream does. Nothing is recorded once ctx is done (the worker was
// stopped).
func (h *handlers) probe(ctx context.Context, t ProbeType, p *corev1.Probe, tg target) (Result, string, error) {
	result, output, err := h.runWithRetries(ctx, p, tg)
	if ctx.Err() != nil {
		return Failure, output, fmt.Errorf("%s probe of container %q stopped: %w", t, tg.container.Name, ctx.Err())
	}
	if err != nil {
		h.log.Debug("probe errored", "probe", t, "pod", podName(tg.pod), "container", tg.container.Name, "err", err)
		h.event(tg, ReasonUnhealthy, fmt.Sprintf("%s probe errored and resulted in %s state: %s", t, result, err))
		return Failure, output, err
	}
	switch result {
	case Success:
		return Success, output, nil
	case Warning:
		h.event(tg, ReasonProbeWarning, fmt.Sprintf("%s probe warning: %s", t, output))
		return Success, output, nil
	case Failure:
		h.log.Debug("probe failed", "probe", t, "pod", podName(tg.pod), "container", tg.container.Name, "output", output)
		h.event(tg, ReasonUnhealthy, fmt.Sprintf("%s probe failed: %s", t, output))
		return Failure, output, nil
	default:
		return Failure, output, nil
	}
}

func (h *handlers) event(tg target, reason, message string) {
	if h.record != nil {
		h.record(tg.pod, tg.container.Name, corev1.EventTypeWarning, reason, message)
	}
}

// runWithRetries runs the probe up to maxProbeRetries times while it
// errors (a failure is a result, not an error, and is not retried).
func (h *handlers) runWithRetries(ctx context.Context, p *corev1.Probe, tg target) (result Result, output string, err error) {
	for i := 0; i < maxProbeRetries; i++ {
		result, output, err = h.run(ctx, p, tg)
		if err == nil || ctx.Err() != nil {
			return result, output, err
		}
	}
	return result, output, err
}

// run runs the probe's handler once, with the probe's timeout.
func (h *handlers) run(ctx context.Context, p *corev1.Probe, tg target) (Result, string, error) {
	timeout := time.Duration(p.TimeoutSeconds) * time.Second
	if timeout <= 0 {
		timeout = defaultTimeoutSeconds * time.Second
	}
	switch {
	case p.Exec != nil:
		cmd := expandCommand(p.Exec.Command, tg.container.Env)
		return h.execProbe(ctx, tg.containerID, cmd, timeout)
	case p.HTTPGet != nil:
		req, err := newHTTPRequest(ctx, p.HTTPGet, tg.container, tg.podIP, h.userAgent)
		if err != nil {
			return Unknown, "", err
		}
		return h.httpProbe(req, timeout)
	case p.TCPSocket != nil:
		port, err := resolvePort(p.TCPSocket.Port, tg.container)
		if err != nil {
			return Unknown, "", err
		}
		host := p.TCPSocket.Host
		if host == "" {
			host = tg.podIP
		}
		return h.tcpProbe(ctx, net.JoinHostPort(host, strconv.Itoa(port)), timeout)
	case p.GRPC != nil:
		service := ""
		if p.GRPC.Service != nil {
			service = *p.GRPC.Service
		}
		return h.grpcProbe(ctx, tg.podIP, int(p.GRPC.Port), service, timeout)
	default:
		return Unknown, "", fmt.Errorf("missing probe handler for %s:%s", podName(tg.pod), tg.container.Name)
	}
}

// resolvePort is upstream's ResolveContainerPort: a number, or the name
// of one of the container's ports (or a number written as a string).
func resolvePort(param intstr.IntOrString, c *corev1.Container) (int, error) {
	var port int
	switch param.Type {
	case intstr.Int:
		port = param.IntValue()
	case intstr.String:
		found := false
		for _, p := range c.Ports {
			if p.Name == param.StrVal {
				port, found = int(p.ContainerPort), true
				break
			}
		}
		if !found {
			n, err := strconv.Atoi(param.StrVal)
			if err != nil {
				return 0, fmt.Errorf("port %q is not a port of container %q nor a number", param.StrVal, c.Name)
			}
			port = n
		}
	default:
		return 0, fmt.Errorf("intOrString had no kind: %+v", param)
	}
	if port <= 0 || port >= 65536 {
		return 0, fmt.Errorf("invalid port number: %v", port)
	}
	return port, nil
}

// podName is upstream's format.Pod: name_namespace(uid).
func podName(pod *corev1.Pod) string {
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}
