package podlifecycle

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/cgroups"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/volumes"
)

// sandboxInfo is the sandbox the pod's containers join.
type sandboxInfo struct {
	id string
	ip string
}

// podContext is what starting one container of a pod needs.
type podContext struct {
	pod       *corev1.Pod
	sandbox   sandboxInfo
	podCgroup string
	volumes   map[string]volumes.Mount
	rs        *runtime.PodStatus
	hosts     string
	resolv    string
}

// createSandbox sets up the pod network, runs the pause container in it and
// records the IP; a failure undoes the network setup.
func (s *Syncer) createSandbox(ctx context.Context, pod *corev1.Pod, podCgroup string, attempt uint32) (_ sandboxInfo, retErr error) {
	wrap := func(op string, err error) error {
		return fmt.Errorf("create sandbox for pod %s: %s: %w", podRef(pod), op, err)
	}
	handler, err := s.runtimeHandler(ctx, pod)
	if err != nil {
		return sandboxInfo{}, wrap("runtime class", err)
	}
	pause, err := s.cfg.Runtime.EnsureImage(ctx, s.cfg.PauseImage, corev1.PullIfNotPresent)
	if err != nil {
		return sandboxInfo{}, wrap("pause image "+s.cfg.PauseImage, err)
	}
	var netnsPath, ip string
	if !pod.Spec.HostNetwork {
		pn := podNetwork(pod, newNetworkID())
		res, err := s.cfg.Network.SetupPod(ctx, pn)
		if err != nil {
			return sandboxInfo{}, wrap("set up network", err)
		}
		defer func() {
			if retErr != nil {
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
				defer cancel()
				if err := s.cfg.Network.TeardownPod(cctx, pn); err != nil {
					s.log.Warn("undo network setup", "pod", podRef(pod), "err", err)
				}
			}
		}()
		netnsPath, ip = res.NetNSPath, res.IP.String()
	}
	id, err := s.cfg.Runtime.RunSandbox(ctx, pod, runtime.SandboxConfig{
		Image: pause, NetNSPath: netnsPath, Attempt: attempt, RuntimeHandler: handler,
		CgroupsPath: cgroups.ContainerCgroupsPath(s.cfg.CgroupDriver, podCgroup, "sandbox-"+newNetworkID()),
	})
	if err != nil {
		return sandboxInfo{}, wrap("run sandbox", err)
	}
	if ip != "" {
		if err := s.cfg.Runtime.SetSandboxIP(ctx, id, ip); err != nil {
			if rerr := s.cfg.Runtime.RemoveSandbox(context.WithoutCancel(ctx), id); rerr != nil {
				s.log.Warn("undo sandbox", "pod", podRef(pod), "id", id, "err", rerr)
			}
			return sandboxInfo{}, wrap("record IP", err)
		}
	}
	s.log.Info("sandbox created", "pod", podRef(pod), "id", id, "ip", ip)
	return sandboxInfo{id: id, ip: ip}, nil
}

// writePodFiles writes the pod's /etc/hosts and /etc/resolv.conf. A
// host-network pod gets a copy of the host's /etc/hosts (with its
// hostAliases) and the resolv.conf its dnsPolicy asks for, as upstream: the
// container's image may have none.
func (s *Syncer) writePodFiles(pc *podContext) error {
	pod := pc.pod
	if s.cfg.PodFilesDir == "" {
		return nil
	}
	var hostHosts []byte
	if pod.Spec.HostNetwork {
		var err error
		if hostHosts, err = os.ReadFile(s.cfg.HostHostsFile); err != nil {
			return fmt.Errorf("write files of pod %s: read the host's hosts file: %w", podRef(pod), err)
		}
	}
	dir := filepath.Join(s.cfg.PodFilesDir, string(pod.UID))
	if err := s.podFilesDir(dir); err != nil {
		return fmt.Errorf("write files of pod %s: %w", podRef(pod), err)
	}
	var ips []string
	if pc.sandbox.ip != "" {
		ips = []string{pc.sandbox.ip}
	}
	pc.hosts = filepath.Join(dir, "hosts")
	pc.resolv = filepath.Join(dir, "resolv.conf")
	dns := runtime.PodDNS(pod, runtime.DNSSettings{
		ClusterDNS: s.cfg.ClusterDNS, ClusterDomain: s.cfg.ClusterDomain, HostResolvConf: s.cfg.HostResolvConf,
	})
	for path, content := range map[string][]byte{
		pc.hosts:  runtime.HostsFile(pod, ips, s.cfg.ClusterDomain, hostHosts),
		pc.resolv: runtime.ResolvConf(dns),
	} {
		if err := os.WriteFile(path, content, 0o644); err != nil {
			return fmt.Errorf("write files of pod %s: %w", podRef(pod), err)
		}
	}
	return nil
}

// startContainer pulls the image (per its policy), creates and starts one
// container. A failure is a *runtime.StartError naming the step that failed
// (its waiting reason follows from it: runtime.WaitingFor).
func (s *Syncer) startContainer(ctx context.Context, pc *podContext, c *corev1.Container, init bool, target string) error {
	pod := pc.pod
	fail := func(stage runtime.StartStage, err error) error {
		return &podError{pod: podRef(pod), err: &runtime.StartError{Container: c.Name, Stage: stage, Err: err}}
	}
	img, err := s.ensureImage(ctx, pod, c)
	if err != nil {
		return fail(runtime.StagePull, err)
	}
	var attempt uint32
	if prev := pc.rs.LatestContainer(c.Name); prev != nil {
		attempt = prev.Attempt + 1
	}
	hostname, err := runtime.SandboxHostname(pod, s.cfg.ClusterDomain)
	if err != nil {
		return fail(runtime.StageConfig, err)
	}
	if pod.Spec.HostNetwork {
		hostname = s.cfg.NodeName
	}
	envCtx, err := s.envContext(ctx, pc, c)
	if err != nil {
		return fail(runtime.StageConfig, err)
	}
	subPaths, err := s.subPaths(pc, c, envCtx)
	if err != nil {
		s.containerEvent(pod, c.Name, corev1.EventTypeWarning, eventFailed, "Error: %v", err)
		return fail(runtime.StageConfig, err)
	}
	termLog, err := s.terminationLogFile(pod, c, attempt)
	if err != nil {
		return fail(runtime.StageCreate, err)
	}
	id, err := s.cfg.Runtime.CreateContainer(ctx, pod, c, runtime.ContainerConfig{
		SandboxID: pc.sandbox.id, Image: img, ImageName: c.Image, Attempt: attempt, Init: init, TargetContainerID: target,
		SpecConfig: runtime.ContainerSpecConfig{
			CgroupsPath:        cgroups.ContainerCgroupsPath(s.cfg.CgroupDriver, pc.podCgroup, "ctr-"+newNetworkID()),
			Env:                envCtx,
			Volumes:            volumeSources(pc.volumes),
			SubPaths:           subPaths,
			Hostname:           hostname,
			HostsPath:          pc.hosts,
			ResolvConfPath:     pc.resolv,
			TerminationLogPath: termLog,
			MemoryCapacity:     s.cfg.MemoryCapacity,
			OOMScoreAdjFloor:   s.cfg.OOMScoreAdjFloor,
		},
	})
	if err != nil {
		s.containerEvent(pod, c.Name, corev1.EventTypeWarning, eventFailed, "Error: %v", err)
		return fail(runtime.StageCreate, err)
	}
	s.containerEvent(pod, c.Name, corev1.EventTypeNormal, eventCreated, "Created container %s", c.Name)
	if err := s.cfg.Runtime.StartContainer(ctx, id); err != nil {
		s.containerEvent(pod, c.Name, corev1.EventTypeWarning, eventFailed, "Error: %v", err)
		return fail(runtime.StageStart, err)
	}
	s.containerEvent(pod, c.Name, corev1.EventTypeNormal, eventStarted, "Started container %s", c.Name)
	if err := s.postStart(ctx, hookTarget{pod: pod, c: c, id: id, podIP: s.podIP(pod, pc.rs, pc.sandbox.ip)}); err != nil {
		return fmt.Errorf("post-start hook of container %s of pod %s: %w", c.Name, podRef(pod), err)
	}
	s.log.Info("container started", "pod", podRef(pod), "container", c.Name, "id", id, "attempt", attempt)
	return nil
}

// startEphemeral starts the pod's i-th ephemeral container, in the PID
// namespace of its target container when it names one (that container's
// running instance).
func (s *Syncer) startEphemeral(ctx context.Context, pc *podContext, i int) error {
	ec := &pc.pod.Spec.EphemeralContainers[i]
	var target string
	if ec.TargetContainerName != "" {
		cs := pc.rs.LatestContainer(ec.TargetContainerName)
		if cs == nil || cs.State != runtime.StateRunning {
			err := fmt.Errorf("target container %q is not running", ec.TargetContainerName)
			s.containerEvent(pc.pod, ec.Name, corev1.EventTypeWarning, eventFailed, "Error: %v", err)
			return &podError{pod: podRef(pc.pod), err: &runtime.StartError{Container: ec.Name, Stage: runtime.StageConfig, Err: err}}
		}
		target = cs.ID
	}
	return s.startContainer(ctx, pc, runtime.EphemeralContainer(pc.pod, i), false, target)
}

// podError names the pod of a failed container start: "<stage> container
// <name> of pod <ns>/<name>: <cause>".
type podError struct {
	pod string
	err *runtime.StartError
}

func (e *podError) Error() string {
	return fmt.Sprintf("%s container %s of pod %s: %v", e.err.Stage, e.err.Container, e.pod, e.err.Err)
}

func (e *podError) Unwrap() error { return e.err }

// envContext is what the container's environment is made from: the pod's
// and the node's IPs, the ConfigMaps and Secrets it names (a failure to
// read them is a Failed event) and the Services of its namespace.
func (s *Syncer) envContext(ctx context.Context, pc *podContext, c *corev1.Container) (runtime.EnvContext, error) {
	pod := pc.pod
	var podIPs, hostIPs []string
	if s.cfg.NodeIP != "" {
		hostIPs = []string{s.cfg.NodeIP}
	}
	if pc.sandbox.ip != "" {
		podIPs = []string{pc.sandbox.ip}
	} else if pod.Spec.HostNetwork {
		podIPs = hostIPs
	}
	envObjs, err := s.envObjects(ctx, pod, c)
	if err != nil {
		s.containerEvent(pod, c.Name, corev1.EventTypeWarning, eventFailed, "Error: %v", err)
		return runtime.EnvContext{}, err
	}
	envCtx := runtime.EnvContext{PodIPs: podIPs, HostIPs: hostIPs, Objects: envObjs, Allocatable: s.cfg.Allocatable}
	if s.cfg.Services != nil {
		all, err := s.cfg.Services()
		if err != nil {
			return runtime.EnvContext{}, fmt.Errorf("list services: %w", err)
		}
		envCtx.Services = runtime.ServiceEnv(runtime.PodServices(all, pod))
	}
	return envCtx, nil
}

// subPaths prepares the container's subPath mounts (subPathExpr expanded
// with the container's environment), by index in its VolumeMounts.
func (s *Syncer) subPaths(pc *podContext, c *corev1.Container, envCtx runtime.EnvContext) (map[int]string, error) {
	var env []string
	out := map[int]string{}
	for i, vm := range c.VolumeMounts {
		if vm.SubPath == "" && vm.SubPathExpr == "" {
			continue
		}
		if env == nil && vm.SubPathExpr != "" {
			var err error
			if env, err = runtime.ContainerEnv(pc.pod, c, envCtx); err != nil {
				return nil, err
			}
		}
		sub, err := volumes.SubPath(vm, env)
		if err != nil || sub == "" {
			if err != nil {
				return nil, err
			}
			continue
		}
		host, err := s.cfg.Volumes.PrepareSubPath(pc.pod, c.Name, i, vm.Name, pc.volumes[vm.Name], sub)
		if err != nil {
			return nil, err
		}
		out[i] = host
	}
	return out, nil
}

// podFilesDir makes PodFilesDir and a directory below it with
// volumes.NodeDirPerm: no other local user reads a pod's files.
func (s *Syncer) podFilesDir(dir string) error {
	for _, d := range []string{s.cfg.PodFilesDir, dir} {
		if err := volumes.EnsureNodeDir(d); err != nil {
			return err
		}
	}
	return nil
}

// TerminationLogPerm is the mode of a termination-log file: the runtime
// gives the file to the container's user and group (which may not be
// root), nobody else may read or write it (upstream makes it 0666 and
// relies on the pod directory's 0750 alone).
const TerminationLogPerm os.FileMode = 0o660

// terminationLogFile creates the empty host file behind the container's
// terminationMessagePath (one per attempt, so a restart starts empty);
// it goes with the pod's files.
func (s *Syncer) terminationLogFile(pod *corev1.Pod, c *corev1.Container, attempt uint32) (string, error) {
	if s.cfg.PodFilesDir == "" || c.TerminationMessagePath == "" {
		return "", nil
	}
	podDir := filepath.Join(s.cfg.PodFilesDir, string(pod.UID))
	dir := filepath.Join(podDir, "termination-log")
	if err := errors.Join(s.podFilesDir(podDir), volumes.EnsureNodeDir(dir)); err != nil {
		return "", fmt.Errorf("termination log of container %s: %w", c.Name, err)
	}
	p := filepath.Join(dir, fmt.Sprintf("%s-%d", c.Name, attempt))
	f, err := os.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|syscall.O_NOFOLLOW, TerminationLogPerm)
	if err != nil {
		return "", fmt.Errorf("termination log of container %s: %w", c.Name, err)
	}
	if err := errors.Join(f.Chmod(TerminationLogPerm), f.Close()); err != nil {
		return "", fmt.Errorf("termination log of container %s: %w", c.Name, err)
	}
	return p, nil
}

// ensureImage resolves the container's image per its pull policy and
// records the outcome in the pull back-off (a failure delays the next pull:
// the plan then holds the container back with ImagePullBackOff).
func (s *Syncer) ensureImage(ctx context.Context, pod *corev1.Pod, c *corev1.Container) (runtime.Image, error) {
	policy := c.ImagePullPolicy
	if policy == "" {
		policy = corev1.PullIfNotPresent
	}
	pull := policy == corev1.PullAlways || (policy == corev1.PullIfNotPresent && !s.cfg.Runtime.ImagePresent(ctx, c.Image))
	if pull {
		s.containerEvent(pod, c.Name, corev1.EventTypeNormal, EventPulling, "Pulling image %q", c.Image)
	}
	img, res, err := s.cfg.Runtime.EnsureImageWith(ctx, c.Image, runtime.PullOptions{Policy: policy, Secrets: s.pullSecrets(ctx, pod)})
	switch {
	case err != nil:
		s.containerEvent(pod, c.Name, corev1.EventTypeWarning, eventFailed, "Failed to pull image %q: %v", c.Image, err)
	case res.Pulled:
		s.containerEvent(pod, c.Name, corev1.EventTypeNormal, EventPulled, "Successfully pulled image %q in %s (%s including waiting). Image size: %d bytes.",
			c.Image, res.Duration.Round(time.Millisecond), res.WithWaiting.Round(time.Millisecond), img.Size)
	default:
		s.containerEvent(pod, c.Name, corev1.EventTypeNormal, EventPulled, "Container image %q already present on machine", c.Image)
	}
	if err != nil {
		s.pullBackoff.Failed(pod.UID, c.Name, c.Image)
		return runtime.Image{}, err
	}
	s.pullBackoff.Succeeded(pod.UID, c.Name)
	return img, nil
}

// pullSecrets fetches the pod's imagePullSecrets; a missing one is
// skipped (as upstream: the pull may still work without it).
func (s *Syncer) pullSecrets(ctx context.Context, pod *corev1.Pod) []*corev1.Secret {
	if s.cfg.Objects == nil {
		return nil
	}
	var out []*corev1.Secret
	for _, ref := range pod.Spec.ImagePullSecrets {
		sec, err := s.cfg.Objects.Secret(ctx, pod.Namespace, ref.Name)
		if err != nil {
			s.log.Info("image pull secret not available", "pod", podRef(pod), "secret", ref.Name, "err", err)
			continue
		}
		out = append(out, sec)
	}
	return out
}

// killPod stops every container (within grace; < 0: the pod's own), then
// every sandbox, and tears down the sandboxes' networks.
func (s *Syncer) killPod(ctx context.Context, pod *corev1.Pod, rs *runtime.PodStatus, grace int64) error {
	if err := s.stopContainers(ctx, pod, rs, grace); err != nil {
		return err
	}
	var errs []error
	for _, sb := range rs.Sandboxes {
		if err := s.cfg.Runtime.StopSandbox(ctx, sb.ID); err != nil {
			errs = append(errs, fmt.Errorf("stop sandbox %s of pod %s: %w", sb.ID, podRef(pod), err))
			continue
		}
		if sb.NetNSPath != "" {
			if err := s.cfg.Network.TeardownPod(ctx, podNetwork(pod, filepath.Base(sb.NetNSPath))); err != nil {
				errs = append(errs, fmt.Errorf("tear down network of sandbox %s of pod %s: %w", sb.ID, podRef(pod), err))
			}
		}
	}
	return errors.Join(errs...)
}

// stopContainers stops the pod's running containers in parallel.
func (s *Syncer) stopContainers(ctx context.Context, pod *corev1.Pod, rs *runtime.PodStatus, grace int64) error {
	d := gracePeriod(pod, grace)
	errc := make(chan error, len(rs.Containers))
	n := 0
	for _, cs := range rs.Containers {
		if cs.State != runtime.StateRunning && cs.State != runtime.StateUnknown {
			continue
		}
		n++
		s.containerEvent(pod, cs.Name, corev1.EventTypeNormal, eventKilling, "Stopping container %s", cs.Name)
		go func(cs runtime.ContainerStatus) {
			if err := s.stopContainer(ctx, hookTarget{pod: pod, c: specOf(pod, cs.Name), id: cs.ID, podIP: s.podIP(pod, rs)}, d); err != nil {
				errc <- fmt.Errorf("stop container %s (%s) of pod %s: %w", cs.Name, cs.ID, podRef(pod), err)
				return
			}
			errc <- nil
		}(cs)
	}
	var errs []error
	for range n {
		errs = append(errs, <-errc)
	}
	return errors.Join(errs...)
}
