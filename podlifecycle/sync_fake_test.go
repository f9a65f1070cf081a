package podlifecycle

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
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
	sandboxes  []runtime.SandboxStatus
	containers []runtime.ContainerStatus
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
	return "id-" + c.Name, nil
}

func (f *fakeRuntime) StartContainer(_ context.Context, id string) error {
	f.calls = append(f.calls, "StartContainer "+id)
	return nil
}

func (f *fakeRuntime) StopContainer(_ context.Context, id string, grace time.Duration) error {
	f.calls = append(f.calls, fmt.Sprintf("StopContainer %s %v", id, grace))
	return nil
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

type fakeCgroups struct{ removed []types.UID }

func (f *fakeCgroups) EnsureQoS(context.Context) error                { return nil }
func (f *fakeCgroups) UpdateQoS(context.Context, []*corev1.Pod) error { return nil }
func (f *fakeCgroups) EnsurePod(_ context.Context, p *corev1.Pod) (string, error) {
	return "/kubepods/pod" + string(p.UID), nil
}
func (f *fakeCgroups) RemovePod(_ context.Context, uid types.UID) error {
	f.removed = append(f.removed, uid)
	return nil
}
func (f *fakeCgroups) PodExists(types.UID) bool       { return false }
func (f *fakeCgroups) ListPods() ([]types.UID, error) { return nil, nil }

type fakeVolumes struct{ torn int }

func (f *fakeVolumes) SetupPod(context.Context, *corev1.Pod) (map[string]volumes.Mount, error) {
	return map[string]volumes.Mount{}, nil
}
func (f *fakeVolumes) PrepareSubPath(_ *corev1.Pod, _ string, _ int, _ string, mnt volumes.Mount, sub string) (string, error) {
	return mnt.HostPath + "/" + sub, nil
}
func (f *fakeVolumes) TeardownPod(context.Context, types.UID) error { f.torn++; return nil }

type fakeSetup struct {
	rt     *fakeRuntime
	net    *fakeNetwork
	cg     *fakeCgroups
	vols   *fakeVolumes
	status *statusRecorder
	s      *Syncer
	now    time.Time
}

func newFakeSyncer(t *testing.T) *fakeSetup {
	t.Helper()
	f := &fakeSetup{rt: &fakeRuntime{imageErr: map[string]error{}}, net: &fakeNetwork{}, cg: &fakeCgroups{},
		vols: &fakeVolumes{}, status: &statusRecorder{}, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	var err error
	f.s, err = NewSyncer(SyncerConfig{
		Runtime: f.rt, Network: f.net, Cgroups: f.cg, Volumes: f.vols, Status: f.status,
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

	f.now = f.now.Add(pullBackoffInitial + time.Second)
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
