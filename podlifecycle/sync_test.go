package podlifecycle

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/cgroups"
	"github.com/nodelet/nodelet/hosttools"
	"github.com/nodelet/nodelet/network"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/containerd"
	"github.com/nodelet/nodelet/runtime/runtimetest"
	"github.com/nodelet/nodelet/test/images"
	"github.com/nodelet/nodelet/test/testkit"
	"github.com/nodelet/nodelet/volumes"
)

const podCIDR = "10.77.0.0/24"

// statusRecorder is a fake StatusSink: it records the statuses set and
// the pods terminated.
type statusRecorder struct {
	mu         sync.Mutex
	list       []corev1.PodStatus
	byUID      map[types.UID]corev1.PodStatus
	terminated []types.UID
}

func (r *statusRecorder) SetPodStatus(pod *corev1.Pod, st corev1.PodStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = append(r.list, st)
	if r.byUID == nil {
		r.byUID = map[types.UID]corev1.PodStatus{}
	}
	r.byUID[pod.UID] = st
}

func (r *statusRecorder) GetPodStatus(uid types.UID) (corev1.PodStatus, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st, ok := r.byUID[uid]
	return st, ok
}

func (r *statusRecorder) TerminatePod(pod *corev1.Pod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.terminated = append(r.terminated, pod.UID)
}

func (r *statusRecorder) terminations() []types.UID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]types.UID(nil), r.terminated...)
}

func (r *statusRecorder) last() corev1.PodStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.list) == 0 {
		return corev1.PodStatus{}
	}
	return r.list[len(r.list)-1]
}

type node struct {
	rt      *containerd.Runtime
	net     *network.Network
	netDirs network.Config
	cg      cgroups.Manager
	logRoot string
	syncer  *Syncer
	status  *statusRecorder
}

func newNode(t *testing.T, base string) *node {
	t.Helper()
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	dir := t.TempDir()
	n := &node{logRoot: filepath.Join(dir, "pods"), status: &statusRecorder{}}

	addr := runtimetest.StartContainerd(t)
	floor, err := cgroups.OwnOOMScoreAdj()
	if err != nil {
		t.Fatal(err)
	}
	n.rt, err = containerd.New(ctx, containerd.Config{
		Address: addr, LogRoot: n.logRoot, StateDir: filepath.Join(dir, "state"),
		RuncRoot: filepath.Join(dir, "runc"), OOMScoreAdjFloor: floor, Logger: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.rt.Close() })
	runtimetest.ImportTestImages(t, n.rt, dir, false)

	n.netDirs = network.Config{
		BinDirs: []string{"/usr/lib/cni"}, ConfDir: filepath.Join(base, "net.d"),
		CacheDir: filepath.Join(base, "cache"), IPAMDir: filepath.Join(base, "ipam"),
		NetNSDir: filepath.Join(base, "netns"), BridgeName: "nlsync0", NetworkName: "nodelet-sync-test", Log: log,
	}
	if n.net, err = network.New(n.netDirs); err != nil {
		t.Fatal(err)
	}
	if err := n.net.EnsureConfig(podCIDR); err != nil {
		t.Fatal(err)
	}

	n.cg, err = cgroups.New(cgroups.Config{Driver: "cgroupfs", Root: testkit.CgroupRoot(t, "nodelet-sync-test"), RemoveTimeout: 2 * time.Second, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.cg.EnsureQoS(ctx); err != nil {
		t.Fatal(err)
	}
	vols, err := volumes.New(volumes.Config{RootDir: filepath.Join(base, "volumes"), Log: log})
	if err != nil {
		t.Fatal(err)
	}

	n.syncer, err = NewSyncer(SyncerConfig{
		Runtime: n.rt, Network: n.net, Cgroups: n.cg, CgroupDriver: cgroups.DriverCgroupfs,
		Volumes: vols, Status: n.status, PodStatus: PodStatusFromList(n.rt.PodStatuses),
		Backoff:    runtime.NewBackoff(time.Second, 10*time.Second, time.Now),
		PauseImage: images.PauseRef, NodeName: "node-a", NodeIP: "10.77.1.1",
		ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local",
		HostResolvConf: []byte("nameserver 127.0.0.1\n"), PodFilesDir: filepath.Join(base, "podfiles"),
		LogRoot: n.logRoot, OOMScoreAdjFloor: floor, MemoryCapacity: 1 << 30, Log: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func busyboxPod() *corev1.Pod {
	grace := int64(1)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: types.UID("uid-sync-" + randHex(4))},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			RestartPolicy:                 corev1.RestartPolicyAlways,
			InitContainers: []corev1.Container{{
				Name: "init", Image: "busybox:1.36", Command: []string{"sh", "-c", "echo init"},
				ImagePullPolicy: corev1.PullIfNotPresent,
			}},
			Containers: []corev1.Container{{
				Name: "app", Image: "busybox:1.36", Command: []string{"sh", "-c", "echo hi; sleep 1000"},
				ImagePullPolicy: corev1.PullIfNotPresent,
			}},
		},
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func TestSyncPodLifecycle(t *testing.T) {
	testkit.InPodNode(t, func(t *testing.T, base string) {
		n := newNode(t, base)
		ctx := context.Background()
		pod := busyboxPod()
		t.Cleanup(func() { // even on failure
			_ = n.syncer.SyncTerminatingPod(ctx, pod, 0)
			if err := n.syncer.SyncTerminatedPod(ctx, pod); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		})

		var st corev1.PodStatus
		deadline := time.Now().Add(60 * time.Second)
		for {
			if _, err := n.syncer.SyncPod(ctx, pod); err != nil {
				t.Logf("SyncPod: %v", err)
			}
			st = n.status.last()
			if st.Phase == corev1.PodRunning && len(st.ContainerStatuses) == 1 && st.ContainerStatuses[0].State.Running != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("pod not running after 60s; last status: %+v", st)
			}
			time.Sleep(200 * time.Millisecond)
		}
		ip, err := netip.ParseAddr(st.PodIP)
		if err != nil || !netip.MustParsePrefix(podCIDR).Contains(ip) {
			t.Fatalf("pod IP %q not in %s (%v)", st.PodIP, podCIDR, err)
		}
		if len(st.InitContainerStatuses) != 1 || st.InitContainerStatuses[0].State.Terminated == nil ||
			st.InitContainerStatuses[0].State.Terminated.ExitCode != 0 {
			t.Errorf("init container status: %+v", st.InitContainerStatuses)
		}
		// A sync of a running pod changes nothing.
		rs0, _ := n.syncer.podStatus(ctx, pod)
		if _, err := n.syncer.SyncPod(ctx, pod); err != nil {
			t.Errorf("steady SyncPod: %v", err)
		}
		rs1, _ := n.syncer.podStatus(ctx, pod)
		if len(rs1.Containers) != len(rs0.Containers) || len(rs1.Sandboxes) != len(rs0.Sandboxes) {
			t.Errorf("steady sync changed the pod: %d/%d containers, %d/%d sandboxes",
				len(rs0.Containers), len(rs1.Containers), len(rs0.Sandboxes), len(rs1.Sandboxes))
		}
		// The pod answers from the node netns (traffic stays in our namespaces).
		if out, err := hosttools.Command("busybox", "ping", "-c1", "-W2", st.PodIP).CombinedOutput(); err != nil {
			t.Errorf("ping %s: %v\n%s", st.PodIP, err, out)
		}
		netnsPath := rs1.LatestSandbox().NetNSPath
		podIP := st.PodIP
		ipFile := filepath.Join(n.netDirs.IPAMDir, n.netDirs.NetworkName, podIP)
		for _, p := range []string{netnsPath, ipFile} {
			if _, err := os.Lstat(p); err != nil {
				t.Errorf("while running: %v", err)
			}
		}
		logs := n.syncer.podLogDir(pod)
		// The output reaches the file asynchronously: wait for it a little.
		var b []byte
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if b, err = os.ReadFile(filepath.Join(logs, "app", "0.log")); (err == nil && strings.Contains(string(b), "hi")) || time.Now().After(deadline) {
				break
			}
		}
		if err != nil || !strings.Contains(string(b), "hi") {
			t.Errorf("app log: %q, %v", b, err)
		}

		start := time.Now()
		if err := n.syncer.SyncTerminatingPod(ctx, pod, 1); err != nil {
			t.Fatalf("SyncTerminatingPod: %v", err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("termination with grace 1 took %v", d)
		}
		st = n.status.last()
		if len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].State.Terminated == nil {
			t.Errorf("after termination: container statuses %+v", st.ContainerStatuses)
		}
		if got := n.status.terminations(); len(got) != 1 || got[0] != pod.UID {
			t.Errorf("after termination: TerminatePod calls %v, want one for %s", got, pod.UID)
		}
		for range 2 { // idempotent
			if err := n.syncer.SyncTerminatedPod(ctx, pod); err != nil {
				t.Fatalf("SyncTerminatedPod: %v", err)
			}
		}
		assertPodGone(t, n, pod, netnsPath, ipFile, logs)
	})
}

func assertPodGone(t *testing.T, n *node, pod *corev1.Pod, netnsPath, ipFile, logs string) {
	t.Helper()
	rs, err := n.syncer.podStatus(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs.Containers) != 0 || len(rs.Sandboxes) != 0 {
		t.Errorf("left in containerd: %d containers, %d sandboxes", len(rs.Containers), len(rs.Sandboxes))
	}
	if _, err := os.Lstat(netnsPath); !os.IsNotExist(err) {
		t.Errorf("netns %s still there: %v", netnsPath, err)
	}
	if _, err := os.Lstat(ipFile); !os.IsNotExist(err) {
		t.Errorf("IP file %s still there: %v", ipFile, err)
	}
	if n.cg.PodExists(pod.UID) {
		t.Errorf("pod cgroup of %s still there", pod.UID)
	}
	if _, err := os.Lstat(logs); !os.IsNotExist(err) {
		t.Errorf("log dir %s still there: %v", logs, err)
	}
}
