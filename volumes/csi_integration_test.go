package volumes

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodelet/nodelet/csi"
)

// apiObjects serves claims, volumes, CSIDrivers and VolumeAttachments
// from a clientset.
type apiObjects struct{ c kubernetes.Interface }

func (o apiObjects) PersistentVolumeClaim(ctx context.Context, ns, name string) (*corev1.PersistentVolumeClaim, error) {
	return o.c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
}
func (o apiObjects) PersistentVolume(ctx context.Context, name string) (*corev1.PersistentVolume, error) {
	return o.c.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
}
func (o apiObjects) CSIDriver(ctx context.Context, name string) (*storagev1.CSIDriver, error) {
	return o.c.StorageV1().CSIDrivers().Get(ctx, name, metav1.GetOptions{})
}
func (o apiObjects) VolumeAttachment(ctx context.Context, name string) (*storagev1.VolumeAttachment, error) {
	return o.c.StorageV1().VolumeAttachments().Get(ctx, name, metav1.GetOptions{})
}

const (
	testDriverName = "test.csi.nodelet.io"
	testNode       = "node-a"
)

// TestCSIDriverLifecycle runs a real CSI driver process (this test
// binary, see TestMain) with its registrar in the registration directory,
// and checks the whole node side: the Watcher registers it (Registry,
// CSINode, the Node's annotation and label); a claim of a CSI volume is
// staged once (after its VolumeAttachment is attached) and published for
// two pods, data written in a pod's mount lands in the driver's backing
// directory; tearing one pod down unpublishes only; a new Manager and
// Watcher on the same root (a nodelet restart) tear the other down,
// unpublishing and unstaging from the directory tree alone; an inline
// volume is published and unpublished without staging; the driver's exit
// deregisters it.
func TestCSIDriverLifecycle(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounts need root")
	}
	root, backing := t.TempDir(), t.TempDir()
	t.Cleanup(func() { // before the TempDirs go, whatever failed
		for _, d := range []string{root, backing} {
			if err := unmountAllBelow(d); err != nil {
				t.Errorf("clean-up: %v", err)
			}
		}
	})
	client := testCSICluster()
	stopDriver := startTestDriver(t, testDriverConfig{Name: testDriverName, NodeID: "node-a-id", Backing: backing,
		Socket:       filepath.Join(root, "plugins", testDriverName, "csi.sock"),
		Registration: filepath.Join(csi.RegistrationDir(root), testDriverName+"-reg.sock")})
	reg, stopWatcher := runWatcher(t, root, client)
	waitFor(t, "driver registered", func() bool { _, err := reg.NodeClient(testDriverName); return err == nil })
	checkRegistered(t, client, backing)

	m := newCSIManager(t, root, client, reg)
	ctx := t.Context()
	pod1, pod2 := claimPod("p1", "uid-pod-1"), claimPod("p2", "uid-pod-2")
	mounts, err := m.SetupPod(ctx, pod1)
	if err != nil {
		t.Fatal(err)
	}
	target1 := filepath.Join(root, "pods", "uid-pod-1", "volumes", "kubernetes.io~csi", "data", "mount")
	staging := filepath.Join(CSIStagingDir(root, testDriverName, "vol-1"), "globalmount")
	if mounts["data"].HostPath != target1 {
		t.Fatalf("mount %+v, want %s", mounts["data"], target1)
	}
	requireMounted(t, true, target1, staging)
	if err := os.WriteFile(filepath.Join(target1, "hello"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(backing, "vol-1", "hello")); err != nil || string(b) != "hi" {
		t.Fatalf("data written in the pod's mount is not in the volume: %q, %v", b, err)
	}
	calls := readCalls(t, backing)
	stage := findCall(calls, "NodeStageVolume")
	if stage == nil || stage.PublishContext["devicePath"] != "/dev/fake" || stage.VolumeContext["a"] != "b" {
		t.Errorf("NodeStageVolume call %+v: want the attachment's metadata and the volume's attributes", stage)
	}
	if pub := findCall(calls, "NodePublishVolume"); pub == nil || pub.VolumeContext["csi.storage.k8s.io/pod.name"] != "p1" ||
		pub.VolumeContext["csi.storage.k8s.io/ephemeral"] != "false" {
		t.Errorf("NodePublishVolume call %+v: want the pod's information (podInfoOnMount)", pub)
	}
	if inUse, err := m.VolumesInUse(); err != nil || !slices.Equal(inUse, []corev1.UniqueVolumeName{"kubernetes.io/csi/" + testDriverName + "^vol-1"}) {
		t.Errorf("VolumesInUse = %v, %v", inUse, err)
	}
	all, err := m.VolumeStats(ctx)
	if st := all[pod1.UID]; err != nil || len(st) != 1 || st[0].PVCRef == nil || st[0].PVCRef.Name != "c1" ||
		st[0].CapacityBytes == nil || *st[0].CapacityBytes == 0 || st[0].Inodes == nil || *st[0].Inodes == 0 {
		t.Errorf("VolumeStats = %+v, %v: want the driver's NodeGetVolumeStats for claim c1", st, err)
	}
	// Idempotent: a second set-up publishes nothing again.
	if _, err := m.SetupPod(ctx, pod1); err != nil {
		t.Fatal(err)
	}
	if _, err := m.SetupPod(ctx, pod2); err != nil {
		t.Fatal(err)
	}
	if n := countCalls(readCalls(t, backing), "NodeStageVolume"); n != 1 {
		t.Errorf("NodeStageVolume called %d times, want 1", n)
	}
	if n := countCalls(readCalls(t, backing), "NodePublishVolume"); n != 2 {
		t.Errorf("NodePublishVolume called %d times, want 2 (one per pod)", n)
	}
	if err := m.TeardownPod(ctx, pod1.UID); err != nil {
		t.Fatal(err)
	}
	requireGone(t, m.PodDir(pod1.UID))
	target2 := filepath.Join(root, "pods", "uid-pod-2", "volumes", "kubernetes.io~csi", "data", "mount")
	requireMounted(t, true, staging, target2)
	if n := countCalls(readCalls(t, backing), "NodeUnstageVolume"); n != 0 {
		t.Errorf("unstaged while another pod uses the volume")
	}

	// A nodelet restart: new Watcher, Registry and Manager, same root.
	stopWatcher()
	reg, stopWatcher = runWatcher(t, root, client)
	defer stopWatcher()
	waitFor(t, "driver registered again", func() bool { _, err := reg.NodeClient(testDriverName); return err == nil })
	m = newCSIManager(t, root, client, reg)
	if b, err := os.ReadFile(filepath.Join(target2, "hello")); err != nil || string(b) != "hi" {
		t.Fatalf("the second pod's mount lost its data over the restart: %q, %v", b, err)
	}
	if err := m.TeardownPod(ctx, pod2.UID); err != nil {
		t.Fatal(err)
	}
	requireGone(t, m.PodDir(pod2.UID), filepath.Dir(staging))
	if unstage := findCall(readCalls(t, backing), "NodeUnstageVolume"); unstage == nil || unstage.Path != staging {
		t.Errorf("NodeUnstageVolume call %+v, want one at %s", unstage, staging)
	}
	if inUse, err := m.VolumesInUse(); err != nil || len(inUse) != 0 {
		t.Errorf("VolumesInUse after teardown = %v, %v", inUse, err)
	}
	if _, err := os.Stat(filepath.Join(backing, "vol-1", "hello")); err != nil {
		t.Errorf("the volume's data did not outlive the pods: %v", err)
	}

	// An inline (ephemeral) volume: published, unpublished, never staged.
	pod3 := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p3", UID: "uid-pod-3"},
		Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{
			CSI: &corev1.CSIVolumeSource{Driver: testDriverName, VolumeAttributes: map[string]string{"size": "1"}}}}}}}
	mounts, err = m.SetupPod(ctx, pod3)
	if err != nil {
		t.Fatal(err)
	}
	requireMounted(t, true, mounts["scratch"].HostPath)
	if err := m.TeardownPod(ctx, pod3.UID); err != nil {
		t.Fatal(err)
	}
	requireGone(t, m.PodDir(pod3.UID))
	if n := countCalls(readCalls(t, backing), "NodeStageVolume"); n != 1 {
		t.Errorf("NodeStageVolume called %d times, want 1 (inline volumes are not staged)", n)
	}

	// The driver goes (its registrar removes the socket): deregistered.
	stopDriver()
	waitFor(t, "driver deregistered", func() bool {
		c, err := client.StorageV1().CSINodes().Get(ctx, testNode, metav1.GetOptions{})
		return err == nil && len(c.Spec.Drivers) == 0
	})
	if _, err := reg.NodeClient(testDriverName); err == nil {
		t.Error("driver still in the registry")
	}
	node, _ := client.CoreV1().Nodes().Get(ctx, testNode, metav1.GetOptions{})
	if _, ok := node.Annotations[csi.AnnotationNodeID]; ok {
		t.Errorf("node annotation left: %v", node.Annotations)
	}
}

// testCSICluster holds the node, a CSIDriver (attach required, pod info
// on mount, both lifecycle modes), a bound claim of a CSI volume and its
// attached VolumeAttachment.
func testCSICluster() *fake.Clientset {
	yes := true
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "c1", UID: "uid-c1"},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv1"}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv1"}, Spec: corev1.PersistentVolumeSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
		ClaimRef:    &corev1.ObjectReference{Namespace: "default", Name: "c1", UID: "uid-c1"},
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
			Driver: testDriverName, VolumeHandle: "vol-1", VolumeAttributes: map[string]string{"a": "b"}}}}}
	driver := &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: testDriverName}, Spec: storagev1.CSIDriverSpec{
		PodInfoOnMount:       &yes,
		VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral}}}
	va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: AttachmentName("vol-1", testDriverName, testNode)},
		Status: storagev1.VolumeAttachmentStatus{Attached: true, AttachmentMetadata: map[string]string{"devicePath": "/dev/fake"}}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, UID: "uid-node-a"}}
	return fake.NewClientset(claim, pv, driver, va, node)
}

func claimPod(name string, uid types.UID) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: uid},
		Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c1"}}}}}}
}

func newCSIManager(t *testing.T, root string, client kubernetes.Interface, reg *csi.Registry) *Manager {
	t.Helper()
	m, err := New(Config{RootDir: root, NodeName: testNode, Claims: apiObjects{client}, CSIObjects: apiObjects{client},
		CSIDrivers: reg, AttachTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// startTestDriver runs the test CSI driver process; the returned stop
// (also a clean-up) ends it, and it removes its sockets.
func startTestDriver(t *testing.T, cfg testDriverConfig) (stop func()) {
	t.Helper()
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), testDriverEnv+"="+string(b))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := false
	stop = func() {
		if done {
			return
		}
		done = true
		cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("test driver: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// runWatcher runs a registration Watcher on root; stop ends it.
func runWatcher(t *testing.T, root string, client kubernetes.Interface) (*csi.Registry, func()) {
	t.Helper()
	reg := csi.NewRegistry()
	w, err := csi.NewWatcher(csi.Config{Dir: csi.RegistrationDir(root), NodeName: testNode, Client: client, Registry: reg,
		Resync: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("watcher: %v", err)
		}
	}
	t.Cleanup(stop)
	return reg, stop
}

// checkRegistered checks what registration left in the API and told the
// registrar.
func checkRegistered(t *testing.T, client kubernetes.Interface, backing string) {
	t.Helper()
	c, err := client.StorageV1().CSINodes().Get(context.Background(), testNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Spec.Drivers) != 1 || c.Spec.Drivers[0].Name != testDriverName || c.Spec.Drivers[0].NodeID != "node-a-id" ||
		c.Spec.Drivers[0].Allocatable == nil || *c.Spec.Drivers[0].Allocatable.Count != 5 {
		t.Errorf("CSINode drivers %+v", c.Spec.Drivers)
	}
	node, _ := client.CoreV1().Nodes().Get(context.Background(), testNode, metav1.GetOptions{})
	if node.Annotations[csi.AnnotationNodeID] != `{"`+testDriverName+`":"node-a-id"}` || node.Labels["topology.test.csi/node"] != "node-a-id" {
		t.Errorf("node annotations %v labels %v", node.Annotations, node.Labels)
	}
	waitFor(t, "registrar told", func() bool {
		n := findCall(readCalls(t, backing), "NotifyRegistrationStatus")
		return n != nil && n.Registered
	})
}

func readCalls(t *testing.T, backing string) []testCall {
	t.Helper()
	f, err := os.Open(filepath.Join(backing, "calls.log"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var calls []testCall
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var c testCall
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("calls.log: %v", err)
		}
		calls = append(calls, c)
	}
	return calls
}

func findCall(calls []testCall, method string) *testCall {
	for i := range calls {
		if calls[i].Method == method {
			return &calls[i]
		}
	}
	return nil
}

func countCalls(calls []testCall, method string) int {
	n := 0
	for _, c := range calls {
		if c.Method == method {
			n++
		}
	}
	return n
}

func requireMounted(t *testing.T, want bool, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if got, err := isMountPoint(d); err != nil || got != want {
			t.Fatalf("%s mounted = %v (%v), want %v", d, got, err, want)
		}
	}
}

func requireGone(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if _, err := os.Lstat(d); !os.IsNotExist(err) {
			t.Fatalf("%s still there (%v)", d, err)
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
