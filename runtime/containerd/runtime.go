// Package containerd is the executor half of the node's runtime: the only
// package that talks to containerd (through its Go client, which it keeps
// to itself). It pulls and imports images, runs sandboxes and containers
// from the specs package runtime builds, lists them back as runtime's
// PodStatus, streams exits, reads metrics, copies logs and serves exec,
// attach and port-forward. What to run, and when, is decided elsewhere
// (runtime's plan, the nodelet's sync loop).
package containerd

// Runtime runs sandboxes (pause containers) and app/init containers on
// containerd through its Go client. Everything it creates carries the
// labels of runtime/types.go, so a restarted nodelet finds its pods from
// containerd alone; exit codes are kept in container labels too
// (containerd forgets them when a task is deleted), see status.go.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	ctrdclient "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/contrib/seccomp"
	capability "github.com/containerd/containerd/v2/pkg/cap"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/containerlogs"
	"github.com/nodelet/nodelet/runtime"
)

// defaultRuntime is the shim every task runs under.
const defaultRuntime = "io.containerd.runc.v2"

// cleanupTimeout bounds the rollback of a failed operation.
const cleanupTimeout = 30 * time.Second

// Config configures Runtime.
type Config struct {
	Address         string // containerd's socket
	Namespace       string // DefaultNamespace when empty
	SnapshotterName string // containerd's default (overlayfs) when empty
	Runtime         string // io.containerd.runc.v2 when empty
	// SeccompProfileRoot holds the Localhost seccomp profiles containers
	// name (upstream: ROOT-DIR/seccomp); empty refuses Localhost profiles.
	SeccompProfileRoot string
	// SeccompDefault gives containerd's default seccomp profile to
	// containers that name none (--seccomp-default).
	SeccompDefault bool
	// RuncRoot is runc's state directory (the shim's default,
	// /run/containerd/runc, when empty); tests keep it in their own tree.
	RuncRoot string
	// RuntimeBinary is the OCI runtime the runc shim runs: runc (its
	// default, when empty) or a compatible one such as crun, by name on
	// containerd's PATH or by path (--runtime-binary).
	RuntimeBinary string
	// RuntimeHandlers maps RuntimeClass handlers to the OCI runtime the
	// runc shim runs for their pods, by name on containerd's PATH or by
	// path (--runtime-handlers; handlers.go). The default handler, runc,
	// is RuntimeBinary unless named here; other handlers are refused.
	RuntimeHandlers map[string]string
	// SystemdCgroup makes runc manage the containers' cgroups through
	// systemd (runc's --systemd-cgroup; cgroupsPath is then
	// "slice:prefix:name", see cgroups.ContainerCgroupsPath). It must be
	// set exactly when the nodelet's cgroup driver is systemd: runc and the
	// nodelet must agree on who owns the tree.
	SystemdCgroup bool
	LogRoot       string // DefaultLogRoot when empty
	// StateDir holds the FIFOs of containers whose output the nodelet
	// copies itself (interactive ones, or all without Logs); containerd's
	// default when empty.
	StateDir string
	// Logs is the node's container logger (see logs.go); nil makes the
	// nodelet copy the output itself (does not survive a restart).
	Logs ContainerLogger
	// LogRotation limits the log files this process writes itself (the
	// logger has its own); zero never rotates.
	LogRotation containerlogs.Rotation
	// OOMScoreAdjFloor: see SandboxSpecConfig.
	OOMScoreAdjFloor int
	// Registry configures image pulls (registry.go).
	Registry RegistryConfig
	Logger   *slog.Logger
}

// Runtime is the nodelet's runtime on containerd. Its methods are safe
// for concurrent use; operations on one pod are serialized by the caller.
type Runtime struct {
	cfg    Config
	client *ctrdclient.Client
	log    *slog.Logger
	pulls  *pullQueue
	// hostCaps are the capabilities of this process: what privileged
	// containers get (nil if unreadable: runtime's full list).
	hostCaps []string

	index *podIndex // pod -> containers, for PodStatus (podindex.go)

	mu       sync.Mutex
	closers  map[string]io.Closer // log files of containers copied in-process
	attached map[string]*attachIO // running interactive containers
}

// New connects to containerd.
func New(ctx context.Context, cfg Config) (*Runtime, error) {
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
	if cfg.Runtime == "" {
		cfg.Runtime = defaultRuntime
	}
	if cfg.LogRoot == "" {
		cfg.LogRoot = runtime.DefaultLogRoot
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	client, _, err := connect(ctx, cfg.Address, cfg.Namespace)
	if err != nil {
		return nil, err
	}
	// containerd grants privileged containers the capabilities of its
	// own process; runc cannot grant one outside the bounding set. The
	// node agent runs with containerd's.
	hostCaps, err := capability.Current()
	if err != nil {
		cfg.Logger.Warn("cannot read this process's capabilities; privileged containers ask for all", "err", err)
		hostCaps = nil
	}
	return &Runtime{
		cfg: cfg, client: client, log: cfg.Logger, pulls: newPullQueue(cfg.Registry.MaxParallelPulls), hostCaps: hostCaps,
		closers: map[string]io.Closer{}, attached: map[string]*attachIO{}, index: newPodIndex(),
	}, nil
}

// Version is containerd's version (docker's and the CRI's
// containerRuntimeVersion without the "containerd://"); asking it is also
// how the node tells that containerd answers.
func (c *Runtime) Version(ctx context.Context) (string, error) {
	v, err := c.client.Version(c.nsCtx(ctx))
	if err != nil {
		return "", fmt.Errorf("ask containerd at %s for its version: %w", c.cfg.Address, err)
	}
	return v.Version, nil
}

// Close closes the connection; sandboxes and containers keep running.
func (c *Runtime) Close() error {
	c.mu.Lock()
	for id, cl := range c.closers {
		if a, ok := c.attached[id]; ok {
			// Keep the FIFOs for the next start to reattach.
			a.detach()
		} else {
			cl.Close()
		}
		delete(c.closers, id)
		delete(c.attached, id)
	}
	c.mu.Unlock()
	return c.client.Close()
}

func (c *Runtime) nsCtx(ctx context.Context) context.Context {
	return namespaces.WithNamespace(ctx, c.cfg.Namespace)
}

// podLabels are the labels shared by a pod's sandboxes and containers.
func podLabels(pod *corev1.Pod, kind string, attempt uint32) map[string]string {
	return map[string]string{
		runtime.LabelPodUID:       string(pod.UID),
		runtime.LabelPodName:      pod.Name,
		runtime.LabelPodNamespace: pod.Namespace,
		runtime.LabelKind:         kind,
		runtime.LabelAttempt:      strconv.FormatUint(uint64(attempt), 10),
	}
}

func newID() string {
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// cleanupCtx is a fresh context (same namespace, no cancellation) for
// rollbacks that must run even when ctx was cancelled.
func cleanupCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
}

// RunSandbox creates and starts the pod's pause container with a new
// snapshot of the pause image. On failure everything created is removed.
func (c *Runtime) RunSandbox(ctx context.Context, pod *corev1.Pod, cfg runtime.SandboxConfig) (_ string, retErr error) {
	ctx = c.nsCtx(ctx)
	// Before an ID exists: the refusal reads the same at every retry, so
	// the pod's events about it aggregate.
	opts, err := c.runtimeOptions(cfg.RuntimeHandler)
	if err != nil {
		return "", fmt.Errorf("run sandbox of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	id := newID()
	wrap := func(op string, err error) error {
		return fmt.Errorf("run sandbox %s of pod %s/%s: %s: %w", id, pod.Namespace, pod.Name, op, err)
	}
	spec := cfg.Spec
	if spec == nil {
		spec, err = runtime.SandboxSpec(runtime.SandboxSpecConfig{
			Pod: pod, Image: cfg.Image.Config, NetNSPath: cfg.NetNSPath,
			CgroupsPath: cfg.CgroupsPath, OOMScoreAdjFloor: c.cfg.OOMScoreAdjFloor, Seccomp: c.seccomp(),
		})
		if err != nil {
			return "", wrap("spec", err)
		}
	}
	img, err := c.client.GetImage(ctx, cfg.Image.Ref)
	if err != nil {
		return "", wrap("get pause image "+cfg.Image.Ref, err)
	}
	labels := podLabels(pod, runtime.KindSandbox, cfg.Attempt)
	labels[runtime.LabelNetNSPath] = cfg.NetNSPath
	cont, err := c.newContainer(ctx, id, img, labels, spec, ctrdclient.WithRuntime(c.cfg.Runtime, opts))
	if err != nil {
		return "", wrap("create container", err)
	}
	defer func() {
		if retErr != nil {
			c.rollBack(ctx, "sandbox", id)
		}
	}()
	task, err := cont.NewTask(ctx, cio.NullIO)
	if err != nil {
		return "", wrap("create task", err)
	}
	if err := task.Start(ctx); err != nil {
		return "", wrap("start task", err)
	}
	return id, nil
}

// SetSandboxIP records the pod IP the network gave a sandbox, so that
// PodStatuses reports it (also after a restart).
func (c *Runtime) SetSandboxIP(ctx context.Context, id, ip string) error {
	ctx = c.nsCtx(ctx)
	cont, err := c.client.LoadContainer(ctx, id)
	if err != nil {
		return fmt.Errorf("set IP of sandbox %s: %w", id, err)
	}
	if _, err := cont.SetLabels(ctx, map[string]string{runtime.LabelSandboxIP: ip}); err != nil {
		return fmt.Errorf("set IP of sandbox %s: %w", id, err)
	}
	return nil
}

// StopSandbox kills the pause process (which ends the pod's PID namespace,
// if it has one) and deletes its task. A missing sandbox or task is
// success. The containers of the sandbox are stopped by the caller first.
func (c *Runtime) StopSandbox(ctx context.Context, id string) error {
	if err := c.stopTask(c.nsCtx(ctx), id, 0); err != nil {
		return fmt.Errorf("stop sandbox %s: %w", id, err)
	}
	return nil
}

// RemoveSandbox removes the sandbox's containers, then the sandbox itself
// with their snapshots, killing any task left. Not found is success.
func (c *Runtime) RemoveSandbox(ctx context.Context, id string) error {
	ctx = c.nsCtx(ctx)
	list, err := c.client.ContainerService().List(ctx, fmt.Sprintf("labels.%q==%q", runtime.LabelSandboxID, id))
	if err != nil {
		return fmt.Errorf("remove sandbox %s: list its containers: %w", id, err)
	}
	var errs []error
	for _, ct := range list {
		if err := c.removeContainer(ctx, ct.ID); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.removeContainer(ctx, id); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove sandbox %s: %w", id, err)
	}
	return nil
}

// shimGroupAnnotation groups containers into one runc shim (containerd's
// runc v2 shim reads it from the OCI spec since 1.5).
const shimGroupAnnotation = "io.containerd.runc.v2.group"

// CreateContainer creates a container in its sandbox with a new snapshot
// of its image, and its task (created, not started), whose output goes to
// the CRI log file. On failure everything created is removed.

func (c *Runtime) CreateContainer(ctx context.Context, pod *corev1.Pod, ctr *corev1.Container, cfg runtime.ContainerConfig) (string, error) {
	ctx = c.nsCtx(ctx)
	id := newID()
	wrap := func(op string, err error) error {
		return fmt.Errorf("create container %s (%s) of pod %s/%s: %s: %w", ctr.Name, id, pod.Namespace, pod.Name, op, err)
	}
	spec, err := c.containerSpec(ctx, pod, ctr, cfg)
	if err != nil {
		return "", wrap("spec", err)
	}
	if err := ownTerminationLog(cfg.SpecConfig.TerminationLogPath, spec); err != nil {
		return "", wrap("termination log", err)
	}
	withRuntime, err := c.sandboxRuntime(ctx, cfg.SandboxID)
	if err != nil {
		return "", wrap("runtime", err)
	}
	if cfg.SandboxID != "" {
		// The runc shim serves every container of a group: one shim per
		// pod (as with CRI) instead of one per container halves the shim
		// processes a pod costs, in start-up CPU and in memory.
		if spec.Annotations == nil {
			spec.Annotations = map[string]string{}
		}
		spec.Annotations[shimGroupAnnotation] = cfg.SandboxID
	}
	img, err := c.client.GetImage(ctx, cfg.Image.Ref)
	if err != nil {
		return "", wrap("get image "+cfg.Image.Ref, err)
	}
	logPath := runtime.ContainerLogPath(c.cfg.LogRoot, pod.Namespace, pod.Name, string(pod.UID), ctr.Name, cfg.Attempt)
	labels := podLabels(pod, runtime.KindContainer, cfg.Attempt)
	labels[runtime.LabelContainer] = ctr.Name
	labels[runtime.LabelSandboxID] = cfg.SandboxID
	labels[runtime.LabelImage] = cfg.ImageName
	labels[runtime.LabelImageRef] = cfg.Image.RepoDigest
	labels[runtime.LabelLogPath] = logPath
	if flags := interactiveFlags(ctr); flags != "" {
		labels[runtime.LabelInteractive] = flags
	}
	runtime.TerminationLabels(labels, ctr, cfg.SpecConfig.TerminationLogPath)
	if cfg.Init {
		labels[runtime.LabelInit] = "true"
	}
	cont, err := c.newContainer(ctx, id, img, labels, spec, withRuntime)
	if err != nil {
		return "", wrap("create container", err)
	}
	if err := c.newTask(ctx, cont, ctr, logPath); err != nil {
		c.rollBack(ctx, "container", id)
		return "", wrap("create task", err)
	}
	return id, nil
}

// newTask creates a container's task (not started) with its IO: the log
// driver, the in-process log copy, or an interactive container's FIFOs.
func (c *Runtime) newTask(ctx context.Context, cont ctrdclient.Container, ctr *corev1.Container, logPath string) error {
	id := cont.ID()
	creator, a, err := c.interactiveCreator(ctr, logPath)
	if err != nil {
		return fmt.Errorf("interactive IO: %w", err)
	}
	var pl *pipeLog
	if a == nil {
		if creator, pl, err = c.logCreator(ctx, id, logPath); err != nil {
			return fmt.Errorf("log: %w", err)
		}
	}
	task, err := cont.NewTask(ctx, creator)
	if err != nil {
		c.removeLogger(ctx, id)
		if pl != nil {
			pl.Close()
		}
		if a != nil {
			a.Close()
		}
		return err
	}
	if a != nil {
		c.registerInteractive(id, a, task.IO())
	}
	if pl != nil {
		pl.io = task.IO()
		c.mu.Lock()
		c.closers[id] = pl
		c.mu.Unlock()
	}
	return nil
}

// containerSpec returns cfg.Spec or builds it, joining the sandbox's
// namespaces through its pause process.
func (c *Runtime) containerSpec(ctx context.Context, pod *corev1.Pod, ctr *corev1.Container, cfg runtime.ContainerConfig) (*specs.Spec, error) {
	if cfg.Spec != nil {
		return cfg.Spec, nil
	}
	sb, err := c.client.LoadContainer(ctx, cfg.SandboxID)
	if err != nil {
		return nil, fmt.Errorf("load sandbox %s: %w", cfg.SandboxID, err)
	}
	task, err := sb.Task(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w: %w", cfg.SandboxID, runtime.ErrSandboxNotRunning, err)
	}
	st, err := task.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("status of sandbox %s: %w", cfg.SandboxID, err)
	}
	if st.Status != ctrdclient.Running {
		return nil, fmt.Errorf("sandbox %s is %s: %w", cfg.SandboxID, st.Status, runtime.ErrSandboxNotRunning)
	}
	sc := cfg.SpecConfig
	sc.Pod, sc.Container, sc.Image, sc.SandboxPID = pod, ctr, cfg.Image.Config, task.Pid()
	if cfg.TargetContainerID != "" {
		if sc.TargetPID, err = c.runningPID(ctx, cfg.TargetContainerID); err != nil {
			return nil, fmt.Errorf("target container: %w", err)
		}
	}
	if sc.OOMScoreAdjFloor == 0 {
		sc.OOMScoreAdjFloor = c.cfg.OOMScoreAdjFloor
	}
	if sc.HostCapabilities == nil {
		sc.HostCapabilities = c.hostCaps
	}
	if sc.Seccomp.RuntimeDefault == nil {
		sc.Seccomp = c.seccomp()
	}
	return runtime.ContainerSpec(sc)
}

// seccomp is how specs get their seccompProfile: RuntimeDefault is
// containerd's default profile, as its CRI plugin gives it.
func (c *Runtime) seccomp() runtime.SeccompConfig {
	return runtime.SeccompConfig{ProfileRoot: c.cfg.SeccompProfileRoot, RuntimeDefault: seccomp.DefaultProfile,
		DefaultToRuntimeDefault: c.cfg.SeccompDefault}
}

// runningPID is the process of a running container's task.
func (c *Runtime) runningPID(ctx context.Context, id string) (uint32, error) {
	cont, err := c.client.LoadContainer(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("load container %s: %w", id, err)
	}
	task, err := cont.Task(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("container %s has no task: %w", id, err)
	}
	st, err := task.Status(ctx)
	if err != nil {
		return 0, fmt.Errorf("status of container %s: %w", id, err)
	}
	if st.Status != ctrdclient.Running {
		return 0, fmt.Errorf("container %s is %s, not running", id, st.Status)
	}
	return task.Pid(), nil
}

// StartContainer starts a created container's task and records the start.
func (c *Runtime) StartContainer(ctx context.Context, id string) error {
	ctx = c.nsCtx(ctx)
	cont, err := c.client.LoadContainer(ctx, id)
	if err != nil {
		return fmt.Errorf("start container %s: %w", id, err)
	}
	task, err := cont.Task(ctx, nil)
	if err != nil {
		return fmt.Errorf("start container %s: load task: %w", id, err)
	}
	if err := task.Start(ctx); err != nil {
		return fmt.Errorf("start container %s: %w", id, err)
	}
	if _, err := cont.SetLabels(ctx, map[string]string{runtime.LabelStartedAt: time.Now().UTC().Format(time.RFC3339Nano)}); err != nil {
		return fmt.Errorf("start container %s: record start: %w", id, err)
	}
	return nil
}

// StopContainer sends SIGTERM, waits up to grace, then SIGKILL; it records
// the exit and deletes the task. A missing container or task is success.
func (c *Runtime) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	if err := c.stopTask(c.nsCtx(ctx), id, grace); err != nil {
		return fmt.Errorf("stop container %s: %w", id, err)
	}
	return nil
}

// RemoveContainer deletes a container, its task (killed if still running)
// and its snapshot. Not found is success. Logs stay until the pod goes.
func (c *Runtime) RemoveContainer(ctx context.Context, id string) error {
	if err := c.removeContainer(c.nsCtx(ctx), id); err != nil {
		return fmt.Errorf("remove container %s: %w", id, err)
	}
	return nil
}

func (c *Runtime) removeContainer(ctx context.Context, id string) error {
	cont, err := c.client.LoadContainer(ctx, id)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("load %s: %w", id, err)
	}
	if task, err := cont.Task(ctx, nil); err == nil {
		if _, err := task.Delete(ctx, ctrdclient.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("delete task of %s: %w", id, err)
		}
	} else if !errdefs.IsNotFound(err) {
		return fmt.Errorf("load task of %s: %w", id, err)
	}
	c.closeLog(id)
	c.removeLogger(ctx, id)
	if err := cont.Delete(ctx, ctrdclient.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("delete %s: %w", id, err)
	}
	c.index.remove(id)
	return nil
}

// stopTask stops id's task: SIGTERM and up to grace to exit (none when
// grace is 0), then SIGKILL; then records the exit in the container's
// labels and deletes the task.
func (c *Runtime) stopTask(ctx context.Context, id string, grace time.Duration) error {
	cont, err := c.client.LoadContainer(ctx, id)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	task, err := cont.Task(ctx, nil)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("load task: %w", err)
	}
	st, err := task.Status(ctx)
	if err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("task status: %w", err)
	}
	if err == nil && st.Status != ctrdclient.Stopped {
		sig, err := ctrdclient.GetStopSignal(ctx, cont, syscall.SIGTERM)
		if err != nil {
			sig = syscall.SIGTERM
		}
		if err := killAndWait(ctx, task, sig, grace); err != nil {
			return err
		}
	}
	return c.reap(ctx, cont, task)
}

// killAndWait delivers the stop signal (when grace > 0: SIGTERM or the
// image's STOPSIGNAL), waits up to grace, then SIGKILL and waits for the
// exit.
func killAndWait(ctx context.Context, task ctrdclient.Task, stop syscall.Signal, grace time.Duration) error {
	waitCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	exited, err := task.Wait(waitCtx)
	if err != nil {
		return fmt.Errorf("wait task: %w", err)
	}
	if grace > 0 {
		if err := task.Kill(ctx, stop); err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("stop signal %d: %w", stop, err)
		}
		timer := time.NewTimer(grace)
		defer timer.Stop()
		select {
		case <-exited:
			return nil
		case <-timer.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := task.Kill(ctx, syscall.SIGKILL, ctrdclient.WithKillAll); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("SIGKILL: %w", err)
	}
	select {
	case <-exited:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// newContainer creates a container with a fresh snapshot of img, run by
// withRuntime (the shim and its options).
func (c *Runtime) newContainer(ctx context.Context, id string, img ctrdclient.Image, labels map[string]string, spec *specs.Spec,
	withRuntime ctrdclient.NewContainerOpts) (ctrdclient.Container, error) {
	cont, err := c.client.NewContainer(ctx, id,
		ctrdclient.WithImage(img),
		ctrdclient.WithSnapshotter(c.cfg.SnapshotterName),
		ctrdclient.WithNewSnapshot(id, img),
		ctrdclient.WithContainerLabels(labels),
		// The image's STOPSIGNAL, read back by stopTask.
		ctrdclient.WithImageStopSignal(img, "SIGTERM"),
		ctrdclient.WithSpec(spec),
		withRuntime,
	)
	if err != nil {
		return nil, err
	}
	c.index.add(types.UID(labels[runtime.LabelPodUID]), id)
	return cont, nil
}

// rollBack removes a half-made sandbox or container, with a fresh context
// since the caller's may be the reason it failed.
func (c *Runtime) rollBack(ctx context.Context, what, id string) {
	cctx, cancel := cleanupCtx(ctx)
	defer cancel()
	if err := c.removeContainer(cctx, id); err != nil {
		c.log.Warn("roll back "+what, "id", id, "err", err)
	}
}

// ownTerminationLog gives the container's host termination-log file (mode
// 0660, made by the caller) to the container's user and group, so a
// container that does not run as root can write it and no other user can.
func ownTerminationLog(path string, spec *specs.Spec) error {
	if path == "" || spec.Process == nil {
		return nil
	}
	u := spec.Process.User
	if err := os.Lchown(path, int(u.UID), int(u.GID)); err != nil {
		return fmt.Errorf("chown %s to %d:%d: %w", path, u.UID, u.GID, err)
	}
	return nil
}
