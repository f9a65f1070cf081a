package nodeapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	crilogs "k8s.io/cri-client/pkg/logs"
	"k8s.io/cri-streaming/pkg/streaming/portforward"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"

	"github.com/nodelet/nodelet/runtime"
)

// serveExec runs a command in a running container over SPDY or WebSocket
// (cri-streaming's server side of kubectl exec). The checks happen before
// the upgrade, so a missing pod or a stopped container is a plain Status.
func (s *Server) serveExec(w http.ResponseWriter, r *http.Request) {
	opts, err := remotecommand.NewOptions(r)
	if err != nil {
		writeStatus(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	cmd := r.URL.Query()["command"]
	if len(cmd) == 0 {
		writeStatus(w, apierrors.NewBadRequest("you must specify at least 1 command"))
		return
	}
	t, c, err := s.runningTarget(r)
	if err != nil {
		writeStatus(w, err)
		return
	}
	ex := executor{rt: s.cfg.Runtime, id: c.ID}
	remotecommand.ServeExec(w, r, ex, t.pod.Name, string(t.pod.UID), t.container, cmd, opts,
		s.cfg.StreamIdleTimeout, s.cfg.StreamCreationTimeout, remotecommand.SupportedStreamingProtocols)
}

// runningTarget finds the request's pod and the running instance of its
// container.
func (s *Server) runningTarget(r *http.Request) (*podTarget, *runtime.ContainerStatus, error) {
	t, err := s.lookup(r.Context(), r, true)
	if err != nil {
		return nil, nil, err
	}
	c, err := t.running()
	if err != nil {
		return nil, nil, err
	}
	return t, c, nil
}

// executor runs commands in one container for the stream server.
type executor struct {
	rt Runtime
	id string
}

func (e executor) ExecInContainer(ctx context.Context, _, _, _ string, cmd []string, in io.Reader, out, errOut io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize, _ time.Duration) error {
	err := e.rt.Exec(ctx, e.id, cmd, in, out, errOut, tty, terminalSizes(ctx, resize))
	var exit *runtime.ExitError
	if errors.As(err, &exit) {
		// The stream server reports this as the command's exit code.
		return utilexec.CodeExitError{Err: err, Code: exit.Code}
	}
	return err
}

// terminalSizes converts the stream server's sizes for the runtime.
func terminalSizes(ctx context.Context, resize <-chan remotecommand.TerminalSize) <-chan runtime.TerminalSize {
	if resize == nil {
		return nil
	}
	sizes := make(chan runtime.TerminalSize)
	go func() {
		defer close(sizes)
		for sz := range resize {
			select {
			case sizes <- runtime.TerminalSize{Width: sz.Width, Height: sz.Height}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return sizes
}

// serveAttach attaches to a running container: to the live streams of an
// interactive one (stdin or tty: kubectl attach -i, kubectl run -it), else
// to its output from now on, read from its log as it is written (the log
// driver owns such a container's pipes).
func (s *Server) serveAttach(w http.ResponseWriter, r *http.Request) {
	opts, err := remotecommand.NewOptions(r)
	if err != nil {
		writeStatus(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	t, c, err := s.runningTarget(r)
	if err != nil {
		writeStatus(w, err)
		return
	}
	spec := t.spec()
	if opts.Stdin && (spec == nil || !spec.Stdin) {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("container %q in pod %q does not have stdin open (spec.containers[].stdin)", t.container, t.pod.Name)))
		return
	}
	a := attacher{rt: s.cfg.Runtime, uid: t.pod.UID, id: c.ID, logPath: c.LogPath}
	remotecommand.ServeAttach(w, r, a, t.pod.Name, string(t.pod.UID), t.container, opts,
		s.cfg.StreamIdleTimeout, s.cfg.StreamCreationTimeout, remotecommand.SupportedStreamingProtocols)
}

type attacher struct {
	rt      Runtime
	uid     types.UID
	id      string
	logPath string
}

func (a attacher) AttachContainer(ctx context.Context, _, _, _ string, in io.Reader, out, errOut io.WriteCloser, _ bool, resize <-chan remotecommand.TerminalSize) error {
	var stdout, stderr io.Writer
	if out != nil {
		stdout = out
	}
	if errOut != nil {
		stderr = errOut
	}
	err := a.rt.Attach(ctx, a.id, in, stdout, stderr, terminalSizes(ctx, resize))
	if !errors.Is(err, runtime.ErrNotAttachable) {
		return err
	}
	none := int64(0)
	if out == nil {
		out = nopCloser{io.Discard}
	}
	if errOut == nil {
		errOut = out
	}
	opts := &crilogs.LogOptions{TailLines: &none, Follow: true}
	return crilogs.ReadLogs(ctx, a.logPath, a.id, opts, containerRunning{rt: a.rt, uid: a.uid}, out, errOut)
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// servePortForward forwards streams to ports inside the pod's network
// namespace (SPDY, or WebSocket with the ports in the query).
func (s *Server) servePortForward(w http.ResponseWriter, r *http.Request) {
	opts, err := portforward.NewV4Options(r)
	if err != nil {
		writeStatus(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	t, err := s.lookup(r.Context(), r, false)
	if err != nil {
		writeStatus(w, err)
		return
	}
	if sb := t.status.LatestSandbox(); sb == nil || sb.State != runtime.StateRunning {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("pod %q has no running sandbox", t.pod.Name)))
		return
	}
	pf := forwarder{rt: s.cfg.Runtime, uid: t.pod.UID}
	portforward.ServePortForward(w, r, pf, t.pod.Name, string(t.pod.UID), opts,
		s.cfg.StreamIdleTimeout, s.cfg.StreamCreationTimeout, portforward.SupportedProtocols)
}

type forwarder struct {
	rt  Runtime
	uid types.UID
}

func (f forwarder) PortForward(ctx context.Context, _, _ string, port int32, stream io.ReadWriteCloser) error {
	return f.rt.PortForward(ctx, f.uid, port, stream)
}

// serveRun runs cmd (space-separated, as upstream's /run) in a running
// container and answers its combined output.
func (s *Server) serveRun(w http.ResponseWriter, r *http.Request) {
	cmd := strings.Fields(r.URL.Query().Get("cmd"))
	if len(cmd) == 0 {
		writeStatus(w, apierrors.NewBadRequest("missing cmd"))
		return
	}
	_, c, err := s.runningTarget(r)
	if err != nil {
		writeStatus(w, err)
		return
	}
	out, _, err := s.cfg.Runtime.ExecSync(r.Context(), c.ID, cmd)
	if err != nil {
		writeStatus(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Write(out)
}
