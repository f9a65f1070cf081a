package podlifecycle

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/network"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/volumes"
)

// Fakes for the plan-then-act logic that needs no real node.

type fakeRuntime struct {
	calls      []string
	runErr     error
	imageErr   map[string]error
	createErr  map[string]error // by container name
	stopErr    error
	startErr   map[string]error // by container ID
	sandboxes  []runtime.SandboxStatus
	containers []runtime.ContainerStatus
	handlers   []string // RunSandbox's runtime handlers
}

func (f *fakeRuntime) EnsureImage(_ context.Context, ref string, _ corev1.PullPolicy) (runtime.Image, error) {
	f.calls = append(f.calls, "EnsureImage "+ref)
	if err := f.imageErr[ref]; err != nil {
		return runtime.Image{}, err
	}
	return runtime.Image{Ref: ref}, nil
}

func (f *fakeRuntime) ImagePresent(context.Context, string) bool { return true }

func (f *fakeRuntime) EnsureImageWith(ctx context.Context, ref string, opts runtime.PullOptions) (runtime.Image, runtime.PullResult, error) {
	img, err := f.EnsureImage(ctx, ref, opts.Policy)
	return img, runtime.PullResult{}, err
}

func (f *fakeRuntime) ExecSync(_ context.Context, id string, _ []string) ([]byte, int, error) {
	f.calls = append(f.calls, "Exec "+id)
	return nil, 0, nil
}

func (f *fakeRuntime) RunSandbox(_ context.Context, _ *corev1.Pod, cfg runtime.SandboxConfig) (string, error) {
	f.calls = append(f.calls, "RunSandbox "+cfg.NetNSPath)
	f.handlers = append(f.handlers, cfg.RuntimeHandler)
	if f.runErr != nil {
		return "", f.runErr
	}
	f.sandboxes = append(f.sandboxes, runtime.SandboxStatus{ID: "sb1", State: runtime.StateRunning, NetNSPath: cfg.NetNSPath})
	return "sb1", nil
}

func (f *fakeRuntime) SetSandboxIP(_ context.Context, id, ip string) error {
	f.calls = append(f.calls, "SetSandboxIP "+ip)
	for i := range f.sandboxes {
		if f.sandboxes[i].ID == id {
			f.sandboxes[i].IP = ip
		}
	}
	return nil
}

func (f *fakeRuntime) StopSandbox(_ context.Context, id string) error {
	f.calls = append(f.calls, "StopSandbox "+id)
	return nil
}

func (f *fakeRuntime) RemoveSandbox(_ context.Context, id string) error {
	f.calls = append(f.calls, "RemoveSandbox "+id)
	return nil
}

func (f *fakeRuntime) CreateContainer(_ context.Context, _ *corev1.Pod, c *corev1.Container, _ runtime.ContainerConfig) (string, error) {
	f.calls = append(f.calls, "CreateContainer "+c.Name)
	if err := f.createErr[c.Name]; err != nil {
		return "", err
	}
	return "id-" + c.Name, nil
}

func (f *fakeRuntime) StartContainer(_ context.Context, id string) error {
	f.calls = append(f.calls, "StartContainer "+id)
	return f.startErr[id]
}

func (f *fakeRuntime) StopContainer(_ context.Context, id string, grace time.Duration) error {
	f.calls = append(f.calls, fmt.Sprintf("StopContainer %s %v", id, grace))
	return f.stopErr
}

func (f *fakeRuntime) RemoveContainer(_ context.Context, id string) error {
	f.calls = append(f.calls, "RemoveContainer "+id)
	return nil
}

func (f *fakeRuntime) status(_ context.Context, uid types.UID) (*runtime.PodStatus, error) {
	return &runtime.PodStatus{UID: uid, Sandboxes: f.sandboxes, Containers: f.containers}, nil
}

type fakeNetwork struct{ setups, teardowns []string }

func (f *fakeNetwork) SetupPod(_ context.Context, p network.PodNetwork) (network.Result, error) {
	f.setups = append(f.setups, p.ID)
	return network.Result{NetNSPath: "/netns/" + p.ID, IP: netip.MustParseAddr("10.0.0.5")}, nil
}

func (f *fakeNetwork) TeardownPod(_ context.Context, p network.PodNetwork) error {
	f.teardowns = append(f.teardowns, p.ID)
	return nil
}

type fakeCgroups struct {
	ensured int
	removed []types.UID
}

func (f *fakeCgroups) EnsureQoS(context.Context) error                { return nil }
func (f *fakeCgroups) UpdateQoS(context.Context, []*corev1.Pod) error { return nil }
func (f *fakeCgroups) EnsurePod(_ context.Context, p *corev1.Pod) (string, error) {
	f.ensured++
	return "/kubepods/pod" + string(p.UID), nil
}
func (f *fakeCgroups) RemovePod(_ context.Context, uid types.UID) error {
	f.removed = append(f.removed, uid)
	return nil
}
func (f *fakeCgroups) PodExists(types.UID) bool       { return false }
func (f *fakeCgroups) ListPods() ([]types.UID, error) { return nil, nil }

type fakeVolumes struct{ setups, torn int }

func (f *fakeVolumes) SetupPod(context.Context, *corev1.Pod) (map[string]volumes.Mount, error) {
	f.setups++
	return map[string]volumes.Mount{}, nil
}
func (f *fakeVolumes) PrepareSubPath(_ *corev1.Pod, _ string, _ int, _ string, mnt volumes.Mount, sub string) (string, error) {
	return mnt.HostPath + "/" + sub, nil
}
func (f *fakeVolumes) TeardownPod(context.Context, types.UID) error { f.torn++; return nil }

// eventRecorder is a fake EventRecorder: "<type> <reason> <message>".
type eventRecorder struct{ events []string }

func (r *eventRecorder) Eventf(_ k8sruntime.Object, eventtype, reason, messageFmt string, args ...any) {
	r.events = append(r.events, eventtype+" "+reason+" "+fmt.Sprintf(messageFmt, args...))
}

type fakeSetup struct {
	rt     *fakeRuntime
	net    *fakeNetwork
	cg     *fakeCgroups
	vols   *fakeVolumes
	status *statusRecorder
	events *eventRecorder
	s      *Syncer
	now    time.Time
}

func newFakeSyncer(t *testing.T) *fakeSetup {
	t.Helper()
	f := &fakeSetup{rt: &fakeRuntime{imageErr: map[string]error{}, createErr: map[string]error{}, startErr: map[string]error{}},
		net: &fakeNetwork{}, cg: &fakeCgroups{}, vols: &fakeVolumes{}, status: &statusRecorder{},
		events: &eventRecorder{}, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	var err error
	f.s, err = NewSyncer(SyncerConfig{
		Runtime: f.rt, Network: f.net, Cgroups: f.cg, Volumes: f.vols, Status: f.status, Recorder: f.events,
		PodStatus: f.rt.status, PauseImage: "pause:1", LogRoot: t.TempDir(),
		HostResolvConf: []byte{}, Now: func() time.Time { return f.now },
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestFailedSandboxUndoesNetwork(t *testing.T) {
	f := newFakeSyncer(t)
	f.rt.runErr = errors.New("runc exploded")
	pod := busyboxPod()
	pod.Spec.InitContainers = nil // with init containers the default is PodInitializing (upstream)
	_, err := f.s.SyncPod(context.Background(), pod)
	if err == nil || !strings.Contains(err.Error(), "create sandbox for pod default/web") || !errors.Is(err, f.rt.runErr) {
		t.Fatalf("error = %v, want a wrapped sandbox error", err)
	}
	if len(f.net.setups) != 1 || len(f.net.teardowns) != 1 || f.net.setups[0] != f.net.teardowns[0] {
		t.Errorf("network setups %v, teardowns %v: want the setup undone", f.net.setups, f.net.teardowns)
	}
	st := f.status.last()
	if len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].State.Waiting == nil {
		t.Fatalf("container status: %+v", st.ContainerStatuses)
	}
	if r := st.ContainerStatuses[0].State.Waiting.Reason; r != "ContainerCreating" {
		t.Errorf("waiting reason %q, want ContainerCreating", r)
	}
}

func TestSyncPodOrderAndImagePullBackOff(t *testing.T) {
	f := newFakeSyncer(t)
	pod := busyboxPod()
	f.rt.imageErr["busybox:1.36"] = fmt.Errorf("pull: %w", runtime.ErrImagePull)
	ctx := context.Background()

	wantReason := func(want string) {
		t.Helper()
		st := f.status.last()
		if len(st.InitContainerStatuses) != 1 || st.InitContainerStatuses[0].State.Waiting == nil ||
			st.InitContainerStatuses[0].State.Waiting.Reason != want {
			t.Errorf("init status %+v, want waiting %s", st.InitContainerStatuses, want)
		}
	}
	if _, err := f.s.SyncPod(ctx, pod); !errors.Is(err, runtime.ErrImagePull) {
		t.Fatalf("first sync: %v, want ErrImagePull", err)
	}
	wantReason("ErrImagePull")
	want := []string{"EnsureImage pause:1", "RunSandbox /netns/" + f.net.setups[0], "SetSandboxIP 10.0.0.5", "EnsureImage busybox:1.36"}
	if strings.Join(f.rt.calls, "\n") != strings.Join(want, "\n") {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(f.rt.calls, "\n"), strings.Join(want, "\n"))
	}

	f.rt.calls = nil
	if _, err := f.s.SyncPod(ctx, pod); err == nil {
		t.Fatal("second sync within the back-off succeeded")
	}
	wantReason("ImagePullBackOff")
	for _, c := range f.rt.calls {
		if strings.HasPrefix(c, "EnsureImage busybox") || strings.HasPrefix(c, "RunSandbox") {
			t.Errorf("unexpected call in back-off: %s", c)
		}
	}

	f.now = f.now.Add(runtime.DefaultPullBackoffInitial + time.Second)
	delete(f.rt.imageErr, "busybox:1.36")
	f.rt.calls = nil
	if _, err := f.s.SyncPod(ctx, pod); err != nil {
		t.Fatalf("sync after back-off: %v", err)
	}
	want = []string{"EnsureImage busybox:1.36", "CreateContainer init", "StartContainer id-init"}
	if strings.Join(f.rt.calls, "\n") != strings.Join(want, "\n") {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(f.rt.calls, "\n"), strings.Join(want, "\n"))
	}
}

func TestTerminateAndCleanup(t *testing.T) {
	f := newFakeSyncer(t)
	pod := busyboxPod()
	f.rt.sandboxes = []runtime.SandboxStatus{{ID: "sb1", State: runtime.StateRunning, IP: "10.0.0.5", NetNSPath: "/netns/n1"}}
	f.rt.containers = []runtime.ContainerStatus{
		{ID: "c1", Name: "app", SandboxID: "sb1", State: runtime.StateRunning},
		{ID: "c0", Name: "init", Init: true, SandboxID: "sb1", State: runtime.StateExited},
	}
	ctx := context.Background()
	if err := f.s.SyncTerminatingPod(ctx, pod, 3); err != nil {
		t.Fatal(err)
	}
	want := []string{"StopContainer c1 3s", "StopSandbox sb1"}
	if strings.Join(f.rt.calls, "\n") != strings.Join(want, "\n") {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(f.rt.calls, "\n"), strings.Join(want, "\n"))
	}
	if len(f.net.teardowns) != 1 || f.net.teardowns[0] != "n1" {
		t.Errorf("teardowns %v, want [n1]", f.net.teardowns)
	}
	if got := f.status.terminations(); len(got) != 1 || got[0] != pod.UID {
		t.Errorf("TerminatePod calls %v, want one for %s", got, pod.UID)
	}
	f.rt.calls = nil
	if err := f.s.SyncTerminatedPod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if len(f.cg.removed) != 1 || f.vols.torn != 1 || f.rt.calls[0] != "RemoveSandbox sb1" {
		t.Errorf("cleanup: cgroups removed %v, volumes torn %d, calls %v", f.cg.removed, f.vols.torn, f.rt.calls)
	}
}

func TestCrashLoopBackOff(t *testing.T) {
	f := newFakeSyncer(t)
	f.s.cfg.Backoff = runtime.NewBackoff(10*time.Second, time.Minute, func() time.Time { return f.now })
	pod := busyboxPod()
	pod.Spec.InitContainers = nil
	ctx := context.Background()
	f.rt.sandboxes = []runtime.SandboxStatus{{ID: "sb1", State: runtime.StateRunning, IP: "10.0.0.5", NetNSPath: "/netns/n1"}}
	exited := func(id string, attempt uint32, at time.Time) runtime.ContainerStatus {
		return runtime.ContainerStatus{ID: id, Name: "app", Image: "busybox:1.36", SandboxID: "sb1", Attempt: attempt,
			State: runtime.StateExited, ExitCode: 1, Reason: "Error", CreatedAt: at.Add(-time.Second),
			StartedAt: at.Add(-time.Second), FinishedAt: at}
	}
	f.rt.containers = []runtime.ContainerStatus{exited("c0", 0, f.now)}
	f.now = f.now.Add(time.Second)
	if _, err := f.s.SyncPod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(f.rt.calls, "\n"), "CreateContainer app") {
		t.Fatalf("first failure: no restart; calls %v", f.rt.calls)
	}

	f.rt.calls = nil
	f.rt.containers = append([]runtime.ContainerStatus{exited("c1", 1, f.now)}, f.rt.containers...) // newest first, as PodStatuses
	f.now = f.now.Add(time.Second)
	if _, err := f.s.SyncPod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.Join(f.rt.calls, "\n"), "CreateContainer") {
		t.Errorf("restarted within the back-off: %v", f.rt.calls)
	}
	st := f.status.last()
	if len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].State.Waiting == nil ||
		st.ContainerStatuses[0].State.Waiting.Reason != runtime.ReasonCrashLoopBackOff {
		t.Errorf("status %+v, want CrashLoopBackOff", st.ContainerStatuses)
	}
}

// waitingOf is the waiting reason each container of st shows ("" when not
// waiting).
func waitingOf(st corev1.PodStatus) map[string]string {
	out := map[string]string{}
	for _, list := range [][]corev1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
		for _, cs := range list {
			out[cs.Name] = ""
			if cs.State.Waiting != nil {
				out[cs.Name] = cs.State.Waiting.Reason
			}
		}
	}
	return out
}

// TestStartFailures: the waiting reason of each failed start follows from
// its step (runtime.StartError), the plan holds back a container whose
// pull is in back-off, and the events stay upstream's.
func TestStartFailures(t *testing.T) {
	pullErr := fmt.Errorf("pull: %w", runtime.ErrImagePull)
	for _, tc := range []struct {
		name string
		// setup prepares the case; it may sync the pod once already.
		setup       func(t *testing.T, f *fakeSetup, pod *corev1.Pod)
		wantWaiting map[string]string
		wantEvents  []string // each in the recorded events
		wantErr     []string // each in the error's message; none: no error
		notCalled   []string // no runtime call with this prefix
		wantResync  time.Duration
	}{{
		name:        "failed pull",
		setup:       func(_ *testing.T, f *fakeSetup, _ *corev1.Pod) { f.rt.imageErr["busybox:1.36"] = pullErr },
		wantWaiting: map[string]string{"app": runtime.ReasonErrImagePull},
		wantEvents:  []string{`Warning Failed Failed to pull image "busybox:1.36": pull: runtime: image pull failed`},
		wantErr:     []string{"pull image for container app of pod default/web"},
		notCalled:   []string{"CreateContainer"},
	}, {
		name: "pull in back-off after a failed one",
		setup: func(t *testing.T, f *fakeSetup, pod *corev1.Pod) {
			f.rt.imageErr["busybox:1.36"] = pullErr
			if _, err := f.s.SyncPod(context.Background(), pod); !errors.Is(err, runtime.ErrImagePull) {
				t.Fatalf("first sync: %v, want ErrImagePull", err)
			}
			f.now = f.now.Add(time.Second)
		},
		wantWaiting: map[string]string{"app": runtime.ReasonImagePullBackOff},
		wantEvents:  []string{`Normal BackOff Back-off pulling image "busybox:1.36"`},
		wantErr:     []string{`pull image for container app of pod default/web: Back-off pulling image "busybox:1.36"`},
		notCalled:   []string{"EnsureImage busybox", "CreateContainer"},
		wantResync:  runtime.DefaultPullBackoffInitial - time.Second,
	}, {
		name: "pull back-off over",
		setup: func(t *testing.T, f *fakeSetup, pod *corev1.Pod) {
			f.rt.imageErr["busybox:1.36"] = pullErr
			_, _ = f.s.SyncPod(context.Background(), pod)
			f.now = f.now.Add(runtime.DefaultPullBackoffInitial)
			delete(f.rt.imageErr, "busybox:1.36")
		},
		// Started; the fake runtime reports no container (default reason).
		wantWaiting: map[string]string{"app": "ContainerCreating"},
		wantEvents:  []string{"Normal Started Started container app"},
	}, {
		name: "image never pulled",
		setup: func(_ *testing.T, f *fakeSetup, _ *corev1.Pod) {
			f.rt.imageErr["busybox:1.36"] = runtime.ErrImageNeverPull
		},
		wantWaiting: map[string]string{"app": runtime.ReasonErrImageNeverPull},
		wantErr:     []string{"pull image for container app of pod default/web"},
	}, {
		name: "env refers to objects the node cannot get",
		setup: func(_ *testing.T, _ *fakeSetup, pod *corev1.Pod) {
			pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{
				ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Key: "k"}}}}
		},
		wantWaiting: map[string]string{"app": runtime.ReasonCreateContainerConfigError},
		wantEvents:  []string{"Warning Failed Error: container app refers to ConfigMaps or Secrets"},
		wantErr:     []string{"configure container app of pod default/web"},
		notCalled:   []string{"CreateContainer"},
	}, {
		name: "hostname too long",
		setup: func(_ *testing.T, f *fakeSetup, pod *corev1.Pod) {
			fqdn := true
			f.s.cfg.ClusterDomain = "cluster.local"
			pod.Spec.Hostname, pod.Spec.Subdomain, pod.Spec.SetHostnameAsFQDN = strings.Repeat("h", 60), "sub", &fqdn
		},
		wantWaiting: map[string]string{"app": runtime.ReasonCreateContainerConfigError},
		wantErr:     []string{"longer than 64 characters"},
		notCalled:   []string{"CreateContainer"},
	}, {
		name: "the runtime rejects the configuration",
		setup: func(_ *testing.T, f *fakeSetup, _ *corev1.Pod) {
			f.rt.createErr["app"] = fmt.Errorf("%w: no user nobody", runtime.ErrContainerConfig)
		},
		wantWaiting: map[string]string{"app": runtime.ReasonCreateContainerConfigError},
		wantEvents:  []string{"Warning Failed Error: container configuration: no user nobody"},
		wantErr:     []string{"create container app of pod default/web"},
	}, {
		name:        "create fails",
		setup:       func(_ *testing.T, f *fakeSetup, _ *corev1.Pod) { f.rt.createErr["app"] = errors.New("disk full") },
		wantWaiting: map[string]string{"app": runtime.ReasonCreateContainerError},
		wantEvents:  []string{"Warning Failed Error: disk full"},
		wantErr:     []string{"create container app of pod default/web: disk full"},
	}, {
		name: "start fails",
		setup: func(_ *testing.T, f *fakeSetup, _ *corev1.Pod) {
			f.rt.startErr["id-app"] = errors.New("exec: no such file")
		},
		wantWaiting: map[string]string{"app": runtime.ReasonRunContainerError},
		wantEvents:  []string{"Normal Created Created container app", "Warning Failed Error: exec: no such file"},
		wantErr:     []string{"start container app of pod default/web"},
	}, {
		name: "two containers fail: each its reason",
		setup: func(_ *testing.T, f *fakeSetup, pod *corev1.Pod) {
			side := pod.Spec.Containers[0]
			side.Name = "side"
			pod.Spec.Containers = append(pod.Spec.Containers, side)
			f.rt.createErr["app"] = errors.New("disk full")
			f.rt.startErr["id-side"] = errors.New("exec: no such file")
		},
		wantWaiting: map[string]string{"app": runtime.ReasonCreateContainerError, "side": runtime.ReasonRunContainerError},
		wantErr:     []string{"create container app of pod default/web", "start container side of pod default/web"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSyncer(t)
			pod := busyboxPod()
			pod.Spec.InitContainers = nil
			f.rt.sandboxes = []runtime.SandboxStatus{{ID: "sb1", State: runtime.StateRunning, IP: "10.0.0.5", NetNSPath: "/netns/n1"}}
			tc.setup(t, f, pod)
			f.rt.calls, f.events.events = nil, nil
			res, err := f.s.SyncPod(context.Background(), pod)
			for _, w := range tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v, want it to contain %q", err, w)
				}
			}
			if len(tc.wantErr) == 0 && err != nil {
				t.Errorf("error %v, want none", err)
			}
			if got := waitingOf(f.status.last()); !reflect.DeepEqual(got, tc.wantWaiting) {
				t.Errorf("waiting %v, want %v", got, tc.wantWaiting)
			}
			all := strings.Join(f.events.events, "\n")
			for _, w := range tc.wantEvents {
				if !strings.Contains(all, w) {
					t.Errorf("events:\n%s\nwant one with %q", all, w)
				}
			}
			for _, c := range f.rt.calls {
				for _, n := range tc.notCalled {
					if strings.HasPrefix(c, n) {
						t.Errorf("unexpected call %q", c)
					}
				}
			}
			if res.ResyncAfter != tc.wantResync {
				t.Errorf("ResyncAfter %v, want %v", res.ResyncAfter, tc.wantResync)
			}
		})
	}
}

// TestSetUpOnlyWhenStarting: a sync that starts nothing sets up no cgroup
// and writes no pod files, but still sets up (refreshes) the volumes.
func TestSetUpOnlyWhenStarting(t *testing.T) {
	f := newFakeSyncer(t)
	f.s.cfg.PodFilesDir = t.TempDir()
	pod := busyboxPod()
	pod.Spec.InitContainers = nil
	f.rt.sandboxes = []runtime.SandboxStatus{{ID: "sb1", State: runtime.StateRunning, IP: "10.0.0.5", NetNSPath: "/netns/n1"}}
	ctx := context.Background()
	if _, err := f.s.SyncPod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if f.cg.ensured != 1 || f.vols.setups != 1 {
		t.Fatalf("starting sync: cgroup ensured %d times, volumes set up %d times; want 1, 1", f.cg.ensured, f.vols.setups)
	}
	hosts := filepath.Join(f.s.cfg.PodFilesDir, string(pod.UID), "hosts")
	if err := os.Remove(hosts); err != nil {
		t.Fatalf("pod files not written: %v", err)
	}
	f.rt.containers = []runtime.ContainerStatus{{ID: "id-app", Name: "app", Image: "busybox:1.36", SandboxID: "sb1",
		State: runtime.StateRunning, StartedAt: f.now}}
	f.rt.calls = nil
	if _, err := f.s.SyncPod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if f.cg.ensured != 1 || f.vols.setups != 2 || len(f.rt.calls) != 0 {
		t.Errorf("steady sync: cgroup ensured %d times, volumes set up %d times, calls %v; want 1, 2, none",
			f.cg.ensured, f.vols.setups, f.rt.calls)
	}
	if _, err := os.Stat(hosts); !os.IsNotExist(err) {
		t.Errorf("steady sync wrote the pod files: %v", err)
	}
}

// fakeEvictions is a fake EvictedStatus: the pods in it are evicted.
type fakeEvictions struct {
	evicted map[types.UID]bool
	current []corev1.PodStatus // the current statuses it was given
}

func (e *fakeEvictions) FinalStatus(pod *corev1.Pod, current corev1.PodStatus) (corev1.PodStatus, bool) {
	e.current = append(e.current, current)
	if !e.evicted[pod.UID] {
		return corev1.PodStatus{}, false
	}
	st := *current.DeepCopy()
	st.Phase, st.Reason, st.Message = corev1.PodFailed, "Evicted", "The node was low on resource: memory."
	return st, true
}

// TestTerminatingPodFinalStatus: once its containers are stopped, an
// evicted pod's final status (made from the desired one) replaces the
// computed one, then the pod is reported terminated; a pod not evicted
// keeps the computed status; a failed stop reports no termination.
func TestTerminatingPodFinalStatus(t *testing.T) {
	for _, tc := range []struct {
		name           string
		evicted        bool
		stopErr        error
		wantReason     string
		wantTerminated int
	}{
		{name: "evicted", evicted: true, wantReason: "Evicted", wantTerminated: 1},
		{name: "not evicted", wantTerminated: 1},
		{name: "stop fails", evicted: true, stopErr: errors.New("stuck"), wantTerminated: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSyncer(t)
			pod := busyboxPod()
			ev := &fakeEvictions{evicted: map[types.UID]bool{pod.UID: tc.evicted}}
			f.s.cfg.Evicted = ev
			f.rt.stopErr = tc.stopErr
			f.rt.sandboxes = []runtime.SandboxStatus{{ID: "sb1", State: runtime.StateRunning, IP: "10.0.0.5", NetNSPath: "/netns/n1"}}
			f.rt.containers = []runtime.ContainerStatus{{ID: "c1", Name: "app", SandboxID: "sb1", State: runtime.StateRunning}}
			err := f.s.SyncTerminatingPod(context.Background(), pod, 3)
			if (err != nil) != (tc.stopErr != nil) || (err != nil && !errors.Is(err, tc.stopErr)) {
				t.Fatalf("SyncTerminatingPod: %v, want %v", err, tc.stopErr)
			}
			if got := len(f.status.terminations()); got != tc.wantTerminated {
				t.Errorf("TerminatePod called %d times, want %d", got, tc.wantTerminated)
			}
			if tc.stopErr != nil {
				if len(ev.current) != 0 {
					t.Errorf("final status asked after a failed stop")
				}
				return
			}
			// The final status is made from the computed (desired) one.
			if len(ev.current) != 1 || len(ev.current[0].ContainerStatuses) != 1 {
				t.Fatalf("FinalStatus given %+v, want the computed status", ev.current)
			}
			st := f.status.last()
			if st.Reason != tc.wantReason {
				t.Errorf("final status reason %q, want %q", st.Reason, tc.wantReason)
			}
			if tc.evicted && (st.Phase != corev1.PodFailed || !reflect.DeepEqual(st.ContainerStatuses, ev.current[0].ContainerStatuses)) {
				t.Errorf("evicted pod's final status %+v, want Failed with the computed containers", st)
			}
		})
	}
}
