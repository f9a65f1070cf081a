package nodelet

import (
	"fmt"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/containerlogs"
	"github.com/nodelet/nodelet/pleg"
	"github.com/nodelet/nodelet/podlifecycle"
	"github.com/nodelet/nodelet/runtime/containerd"
)

// logRotation is the containers' log limits, upstream's defaults filled in.
func (a *Agent) logRotation() containerlogs.Rotation {
	r := containerlogs.Rotation{MaxSize: a.cfg.ContainerLogMaxSize, MaxFiles: a.cfg.ContainerLogMaxFiles}
	if r.MaxSize == 0 {
		r.MaxSize = containerlogs.DefaultMaxSize
	}
	if r.MaxFiles == 0 {
		r.MaxFiles = containerlogs.DefaultMaxFiles
	}
	return r
}

// containerLogs is the client of the node's container logger (nil without
// LoggerCommand: the runtime copies output itself). Made once; Run keeps
// the logger alive through it.
func (a *Agent) containerLogs() containerd.ContainerLogger {
	if len(a.cfg.LoggerCommand) == 0 {
		return nil
	}
	if a.logs == nil {
		a.logs = containerlogs.NewClient(containerlogs.ClientConfig{
			Dir:      a.loggerDir(),
			Command:  append(append([]string(nil), a.cfg.LoggerCommand...), "--dir", a.loggerDir()),
			Rotation: a.logRotation(),
			Log:      a.log,
		})
	}
	return a.logs
}

// logDropReporter polls the container logger for the output it dropped
// (nodelet_container_log_dropped_bytes_total, _lines_total) and puts a
// Warning event on the pod of a container whose log started dropping; nil
// without the container logger.
func (a *Agent) logDropReporter(w *wired, recorder podlifecycle.EventRecorder) *containerlogs.DropReporter {
	if a.logs == nil {
		return nil
	}
	log := a.log.With("component", "container-log-drops")
	cache := w.pleg.Cache()
	started := func(id string, d containerlogs.Drops) {
		uid, name := containerOf(cache, id)
		pod := podByUID(w, uid)
		if pod == nil {
			log.Warn("a container's log is dropping output; its pod is unknown", "id", id, "err", d.Err)
			return
		}
		logDroppedEvent(recorder, pod, name, d)
	}
	return containerlogs.NewDropReporter(containerlogs.DropReporterConfig{
		Drops: a.logs.Drops, Metrics: a.metrics, Started: started, Log: log})
}

// logDroppedEvent is the Warning event on the pod of a container whose
// log started dropping output.
func logDroppedEvent(recorder podlifecycle.EventRecorder, pod *corev1.Pod, container string, d containerlogs.Drops) {
	recorder.Eventf(podlifecycle.PodReference(pod, podlifecycle.ContainerFieldPath(pod, container)), corev1.EventTypeWarning,
		containerlogs.EventLogDropped, "Container %s's log dropped %d bytes of output (%d lines) it could not write: %s",
		container, d.Bytes, d.Lines, d.Err)
}

// containerOf finds a container's pod and name in the PLEG's cache.
func containerOf(cache *pleg.Cache, id string) (types.UID, string) {
	for _, uid := range cache.UIDs() {
		st, _ := cache.Get(uid)
		if st == nil {
			continue
		}
		for _, c := range st.Containers {
			if c.ID == id {
				return uid, c.Name
			}
		}
	}
	return "", ""
}

// loggerDir holds the logger's socket, registrations and FIFOs.
func (a *Agent) loggerDir() string { return filepath.Join(a.cfg.RootDir, "logger") }

// checkLogConfig refuses log limits upstream's kubelet refuses, and a root
// directory too long for the logger's unix socket.
func checkLogConfig(cfg *Config) error {
	if cfg.ContainerLogMaxSize < 0 {
		return fmt.Errorf("nodelet: container log max size %d must not be negative", cfg.ContainerLogMaxSize)
	}
	if cfg.ContainerLogMaxFiles != 0 && cfg.ContainerLogMaxFiles < 2 {
		return fmt.Errorf("nodelet: container log max files %d must be at least 2", cfg.ContainerLogMaxFiles)
	}
	// sockaddr_un holds 108 bytes with the terminating NUL.
	if sock := containerlogs.SocketPath(filepath.Join(cfg.RootDir, "logger")); len(cfg.LoggerCommand) > 0 && len(sock) > 107 {
		return fmt.Errorf("nodelet: root dir %s is too long: the container logger's socket %s exceeds 107 bytes", cfg.RootDir, sock)
	}
	return nil
}
