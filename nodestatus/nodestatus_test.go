package nodestatus

import (
	"context"
	"errors"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/controlplane/controlplanetest"
	"github.com/nodelet/nodelet/test/testkit"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

type harness struct {
	cs    *kubernetes.Clientset
	clock *clocktesting.FakeClock
	s     *Syncer
	// notReady is the readiness error; calls counts Readiness calls.
	notReady atomic.Pointer[error]
	calls    chan struct{}
}

func newHarness(t *testing.T, mutate func(*Config)) *harness {
	t.Helper()
	srv := controlplanetest.Start(t, controlplanetest.Options{})
	h := &harness{cs: srv.Clientset(t), clock: clocktesting.NewFakeClock(t0), calls: make(chan struct{}, 100)}
	cfg := Config{
		Client: h.cs, NodeName: "n1", NodeIP: "10.1.2.3", RootDir: t.TempDir(),
		Labels:                  map[string]string{"tier": "edge"},
		SystemReserved:          corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
		KubeReserved:            corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
		ContainerRuntimeVersion: "containerd://1.6.20",
		Clock:                   h.clock,
		Readiness: func() error {
			select {
			case h.calls <- struct{}{}:
			default:
			}
			if p := h.notReady.Load(); p != nil {
				return *p
			}
			return nil
		},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.s = s
	return h
}

func (h *harness) run(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := h.s.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

func (h *harness) node(t *testing.T) *corev1.Node {
	t.Helper()
	n, err := h.cs.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return n
}

func condition(n *corev1.Node, typ corev1.NodeConditionType) *corev1.NodeCondition {
	if n == nil {
		return nil
	}
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == typ {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func (h *harness) waitReady(t *testing.T, status corev1.ConditionStatus) *corev1.Node {
	t.Helper()
	var n *corev1.Node
	testkit.Eventually(t, 10*time.Second, "Ready="+string(status), func() bool {
		n = h.node(t)
		c := condition(n, corev1.NodeReady)
		return c != nil && c.Status == status
	})
	return n
}

// step advances the fake clock once the loop waits on its tickers, and
// returns after the status sync of that tick read readiness.
func (h *harness) step(t *testing.T, d time.Duration) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, "tickers", func() bool { return h.clock.Waiters() >= 2 })
	for len(h.calls) > 0 {
		<-h.calls
	}
	h.clock.Step(d)
	select {
	case <-h.calls:
	case <-time.After(10 * time.Second):
		t.Fatal("no status sync after the clock stepped")
	}
}

func TestRegistration(t *testing.T) {
	h := newHarness(t, nil)
	if a := h.s.Addresses(); a != nil {
		t.Errorf("addresses before registration: %v", a)
	}
	h.run(t)
	n := h.waitReady(t, corev1.ConditionTrue)

	for k, v := range map[string]string{
		"kubernetes.io/hostname": "n1", "kubernetes.io/os": runtime.GOOS, "kubernetes.io/arch": runtime.GOARCH,
		"beta.kubernetes.io/os": runtime.GOOS, "beta.kubernetes.io/arch": runtime.GOARCH, "tier": "edge",
	} {
		if n.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, n.Labels[k], v)
		}
	}
	memTotal, err := parseMemTotalFile()
	if err != nil {
		t.Fatal(err)
	}
	capacity, alloc := n.Status.Capacity, n.Status.Allocatable
	if got := capacity.Cpu().Value(); got != int64(runtime.NumCPU()) {
		t.Errorf("cpu capacity = %d, want %d", got, runtime.NumCPU())
	}
	if got := capacity.Memory().Value(); got != memTotal {
		t.Errorf("memory capacity = %d, want %d", got, memTotal)
	}
	if capacity.Pods().Value() != 110 || capacity.StorageEphemeral().Value() <= 0 {
		t.Errorf("capacity = %v", capacity)
	}
	if got, want := alloc.Cpu().MilliValue(), int64(runtime.NumCPU())*1000-500; got != want {
		t.Errorf("allocatable cpu = %dm, want %dm", got, want)
	}
	if got, want := alloc.Memory().Value(), memTotal-384<<20; got != want {
		t.Errorf("allocatable memory = %d, want %d", got, want)
	}
	if !alloc.StorageEphemeral().Equal(*capacity.StorageEphemeral()) || alloc.Pods().Value() != 110 {
		t.Errorf("allocatable = %v", alloc)
	}
	wantAddrs := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.1.2.3"}, {Type: corev1.NodeHostName, Address: "n1"}}
	if len(n.Status.Addresses) != 2 || n.Status.Addresses[0] != wantAddrs[0] || n.Status.Addresses[1] != wantAddrs[1] {
		t.Errorf("addresses = %v, want %v", n.Status.Addresses, wantAddrs)
	}
	// What the serving certificate is asked for: the addresses the API
	// server holds.
	testkit.Eventually(t, 10*time.Second, "the Syncer's addresses", func() bool {
		a := h.s.Addresses()
		return len(a) == 2 && a[0] == wantAddrs[0] && a[1] == wantAddrs[1]
	})
	info := n.Status.NodeInfo
	if info.KubeletVersion != "v1.37.2+nodelet" || info.ContainerRuntimeVersion != "containerd://1.6.20" ||
		info.KernelVersion == "" || info.OSImage == "" || info.BootID == "" || info.OperatingSystem != runtime.GOOS || info.Architecture != runtime.GOARCH {
		t.Errorf("nodeInfo = %+v", info)
	}
	ready := condition(n, corev1.NodeReady)
	if ready.Reason != "KubeletReady" || ready.Message != "kubelet is posting ready status" || !ready.LastHeartbeatTime.Time.Equal(t0) {
		t.Errorf("Ready = %+v", ready)
	}
	for typ, reason := range map[corev1.NodeConditionType]string{
		corev1.NodeMemoryPressure: "KubeletHasSufficientMemory", corev1.NodeDiskPressure: "KubeletHasNoDiskPressure",
		corev1.NodePIDPressure: "KubeletHasSufficientPID",
	} {
		if c := condition(n, typ); c == nil || c.Status != corev1.ConditionFalse || c.Reason != reason {
			t.Errorf("%s = %+v, want False/%s", typ, c, reason)
		}
	}
}

func TestLeaseRenewed(t *testing.T) {
	h := newHarness(t, nil)
	h.run(t)
	n := h.waitReady(t, corev1.ConditionTrue)
	leases := h.cs.CoordinationV1().Leases("kube-node-lease")
	renewedAt := func(want time.Time) func() bool {
		return func() bool {
			l, err := leases.Get(context.Background(), "n1", metav1.GetOptions{})
			return err == nil && l.Spec.RenewTime != nil && l.Spec.RenewTime.Time.Equal(want)
		}
	}
	testkit.Eventually(t, 10*time.Second, "lease created", renewedAt(t0))
	l, err := leases.Get(context.Background(), "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *l.Spec.HolderIdentity != "n1" || *l.Spec.LeaseDurationSeconds != 40 {
		t.Errorf("lease spec = %+v", l.Spec)
	}
	if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].Kind != "Node" || l.OwnerReferences[0].UID != n.UID {
		t.Errorf("lease owners = %+v, want the node %s", l.OwnerReferences, n.UID)
	}
	for i := 1; i <= 2; i++ {
		h.step(t, 10*time.Second)
		testkit.Eventually(t, 10*time.Second, "lease renewed", renewedAt(t0.Add(time.Duration(i)*10*time.Second)))
	}
	// A lease deleted behind our back is created again.
	if err := leases.Delete(context.Background(), "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.step(t, 10*time.Second)
	testkit.Eventually(t, 10*time.Second, "lease re-created", renewedAt(t0.Add(30*time.Second)))
}

func TestNotReadyAndReportFrequency(t *testing.T) {
	h := newHarness(t, nil)
	notReady := errors.New("container runtime network not ready: cni config uninitialized")
	h.notReady.Store(&notReady)
	h.run(t)
	n := h.waitReady(t, corev1.ConditionFalse)
	ready := condition(n, corev1.NodeReady)
	if ready.Reason != "KubeletNotReady" || ready.Message != notReady.Error() {
		t.Fatalf("Ready = %+v", ready)
	}
	// Nothing changed: no write, the heartbeat stays.
	h.step(t, 10*time.Second)
	h.step(t, 10*time.Second) // the previous sync has finished
	if c := condition(h.node(t), corev1.NodeReady); !c.LastHeartbeatTime.Time.Equal(t0) {
		t.Fatalf("unchanged status was written: heartbeat %v", c.LastHeartbeatTime)
	}
	// Ready again: written at once, new transition time.
	h.notReady.Store(nil)
	h.step(t, 10*time.Second)
	n = h.waitReady(t, corev1.ConditionTrue)
	ready = condition(n, corev1.NodeReady)
	want := t0.Add(30 * time.Second)
	if !ready.LastTransitionTime.Time.Equal(want) || !ready.LastHeartbeatTime.Time.Equal(want) || ready.Reason != "KubeletReady" {
		t.Fatalf("Ready after recovery = %+v, want transition and heartbeat at %v", ready, want)
	}
	mem := condition(n, corev1.NodeMemoryPressure)
	if !mem.LastTransitionTime.Time.Equal(t0) {
		t.Fatalf("MemoryPressure transition moved to %v although it did not change", mem.LastTransitionTime)
	}
	// After StatusReportFrequency the status is written even unchanged.
	h.step(t, 5*time.Minute)
	testkit.Eventually(t, 10*time.Second, "periodic report", func() bool {
		c := condition(h.node(t), corev1.NodeReady)
		return c.LastHeartbeatTime.Time.Equal(want.Add(5*time.Minute)) && c.LastTransitionTime.Time.Equal(want)
	})
}

func TestExistingNodeReused(t *testing.T) {
	h := newHarness(t, nil)
	pre := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"kubernetes.io/hostname": "stale", "custom": "kept"}},
		Spec:       corev1.NodeSpec{Unschedulable: true, PodCIDR: "10.244.7.0/24", PodCIDRs: []string{"10.244.7.0/24"}},
	}
	created, err := h.cs.CoreV1().Nodes().Create(context.Background(), pre, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.run(t)
	n := h.waitReady(t, corev1.ConditionTrue)
	if n.UID != created.UID {
		t.Fatalf("node was re-created: uid %s, want %s", n.UID, created.UID)
	}
	if n.Labels["kubernetes.io/hostname"] != "n1" || n.Labels["custom"] != "kept" || n.Labels["kubernetes.io/os"] != runtime.GOOS {
		t.Errorf("labels = %v", n.Labels)
	}
	if !n.Spec.Unschedulable {
		t.Error("spec.unschedulable was lost")
	}
	if n.Status.Capacity.Pods().Value() != 110 {
		t.Errorf("capacity not reconciled: %v", n.Status.Capacity)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if cidr, err := h.s.WaitPodCIDR(ctx); err != nil || cidr != "10.244.7.0/24" {
		t.Fatalf("WaitPodCIDR = %q, %v", cidr, err)
	}
}

func TestPodCIDRAssignedLater(t *testing.T) {
	h := newHarness(t, nil)
	h.run(t)
	h.waitReady(t, corev1.ConditionTrue)
	if got := h.s.PodCIDR(); got != "" {
		t.Fatalf("PodCIDR before assignment = %q", got)
	}
	n := h.node(t)
	n.Spec.PodCIDR, n.Spec.PodCIDRs = "10.244.3.0/24", []string{"10.244.3.0/24"}
	if _, err := h.cs.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if cidr, err := h.s.WaitPodCIDR(ctx); err != nil || cidr != "10.244.3.0/24" {
		t.Fatalf("WaitPodCIDR = %q, %v", cidr, err)
	}
}

func TestPodCIDRFlag(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.PodCIDR = "10.88.0.0/24" })
	if got := h.s.PodCIDR(); got != "10.88.0.0/24" {
		t.Fatalf("PodCIDR = %q", got)
	}
	h.run(t)
	n := h.waitReady(t, corev1.ConditionTrue)
	if n.Spec.PodCIDR != "10.88.0.0/24" {
		t.Fatalf("spec.podCIDR = %q, want the flag's", n.Spec.PodCIDR)
	}
}

func parseMemTotalFile() (int64, error) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	return parseMemTotal(data)
}

func TestRegisterWithTaintsAndMaxPods(t *testing.T) {
	taints := []corev1.Taint{{Key: "dedicated", Value: "edge", Effect: corev1.TaintEffectNoSchedule}}
	h := newHarness(t, func(c *Config) { c.Taints, c.MaxPods = taints, 30 })
	h.run(t)
	n := h.waitReady(t, corev1.ConditionTrue)
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0] != taints[0] {
		t.Errorf("taints = %v, want %v", n.Spec.Taints, taints)
	}
	if n.Status.Capacity.Pods().Value() != 30 {
		t.Errorf("pods capacity = %v, want 30", n.Status.Capacity.Pods())
	}
}

// A pressure change is written at once, not at the next status tick (the
// fake clock never moves here).
func TestPressureChangeWritesStatusAtOnce(t *testing.T) {
	var disk atomic.Bool
	changed := make(chan struct{}, 1)
	h := newHarness(t, func(c *Config) {
		c.Pressure = func() (bool, bool, bool) { return false, disk.Load(), false }
		c.PressureChanged = changed
	})
	h.run(t)
	h.waitReady(t, corev1.ConditionTrue)
	// The lease is renewed after the first status sync: the loop waits.
	testkit.Eventually(t, 10*time.Second, "the lease", func() bool {
		_, err := h.cs.CoordinationV1().Leases("kube-node-lease").Get(context.Background(), "n1", metav1.GetOptions{})
		return err == nil
	})
	disk.Store(true)
	changed <- struct{}{}
	testkit.Eventually(t, 10*time.Second, "DiskPressure=True", func() bool {
		c := condition(h.node(t), corev1.NodeDiskPressure)
		return c != nil && c.Status == corev1.ConditionTrue
	})
}
