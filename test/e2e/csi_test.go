package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/images"
	"github.com/nodelet/nodelet/test/testkit"
)

const csiMockDriver = "io.kubernetes.storage.mock"

// csiImages writes the CSI driver's images: the upstream
// external-provisioner (from the module proxy, cached) and the tests'
// mock driver and registrar.
func csiImages(dir string) error {
	if _, err := images.ExternalProvisionerImage(dir, images.CacheDir()); err != nil {
		return err
	}
	if _, err := images.CSIMockDriverImage(dir); err != nil {
		return err
	}
	_, err := images.CSIRegistrarImage(dir)
	return err
}

// csiAttacherImage writes the upstream external-attacher's image (from
// the module proxy, cached).
func csiAttacherImage(dir string) error {
	_, err := images.ExternalAttacherImage(dir, images.CacheDir())
	return err
}

// csiEnv is a node with the mock CSI driver deployed (testdata).
type csiEnv struct {
	cp       *controlPlane
	node     *realNode
	dataDir  string // the volumes' directories on the host
	manifest string
}

// csiMock says which parts of the mock CSI driver deployCSIMock deploys
// beside its cluster side (csi-mock-driver.yaml).
type csiMock struct {
	node   bool // its node side (csi-mock-node.yaml)
	attach bool // as a driver that attaches, with the external-attacher (csi-mock-attach.yaml)
}

// deployCSIMock starts an in-cluster node, applies the driver's cluster
// side and the parts parts asks for, and waits for their pods to run.
func deployCSIMock(t *testing.T, name string, parts csiMock) *csiEnv {
	t.Helper()
	archives := []func(string) error{csiImages}
	if parts.attach {
		archives = append(archives, csiAttacherImage)
	}
	cp, node := startInClusterNode(t, name, archives...)
	e := &csiEnv{cp: cp, node: node, dataDir: filepath.Join(t.TempDir(), "csi-data")}
	read := func(f string) string {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	manifests, workloads := []string{read("testdata/csi-mock-driver.yaml")}, []string{"deployment/csi-mock-controller"}
	if parts.attach {
		manifests = []string{withoutKinds(manifests[0], "CSIDriver", "Deployment"), read("testdata/csi-mock-attach.yaml")}
	}
	if parts.node {
		manifests, workloads = append(manifests, read("testdata/csi-mock-node.yaml")), append(workloads, "daemonset/csi-mock-node")
	}
	e.manifest = strings.NewReplacer("ROOT_DIR", filepath.Join(node.dir, "root"), "DATA_DIR", e.dataDir).Replace(strings.Join(manifests, "---\n"))
	if out, errOut, err := cp.kubectlStdin(e.manifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply the CSI driver: %v\n%s%s", err, out, errOut)
	}
	for _, w := range workloads {
		waitRolledOut(t, cp, "csi-mock", w)
	}
	return e
}

// withoutKinds drops the documents of the given kinds from a YAML stream.
func withoutKinds(stream string, kinds ...string) string {
	var kept []string
	for _, doc := range strings.Split(stream, "\n---\n") {
		if !slices.ContainsFunc(kinds, func(k string) bool { return strings.Contains("\n"+doc, "\nkind: "+k+"\n") }) {
			kept = append(kept, doc)
		}
	}
	return strings.Join(kept, "\n---\n") + "\n"
}

// remove deletes the driver and waits until no pod is left and the node
// holds nothing of them.
func (e *csiEnv) remove(t *testing.T) {
	t.Helper()
	if out, errOut, err := e.cp.kubectlStdin(e.manifest, "delete", "-f", "-", "--wait=false", "--ignore-not-found"); err != nil {
		t.Errorf("delete the CSI driver: %v\n%s%s", err, out, errOut)
	}
	testkit.Eventually(t, 120*time.Second, "no pods and the driver's namespace gone", func() bool {
		out, _, _ := e.cp.kubectl("get", "pods", "-A", "-o", "name")
		ns, _, _ := e.cp.kubectl("get", "namespace", "csi-mock", "--ignore-not-found", "-o", "name")
		return strings.TrimSpace(out) == "" && strings.TrimSpace(ns) == ""
	})
	waitNoLeftovers(t, e.node)
}

// runClaimPod waits for the driver in the node's CSINode, then runs pod
// "user" writing word to its claim "csi" of the driver's class, and
// waits for the word in the volume's directory on the host. It returns
// the volume, its handle and that directory.
func (e *csiEnv) runClaimPod(t *testing.T, word string) (pv, handle, volDir string) {
	t.Helper()
	testkit.Eventually(t, 60*time.Second, "the driver registered in the CSINode", func() bool {
		return e.jsonpath("get", "csinode", e.node.name, "{.spec.drivers[*].name}/{.spec.drivers[*].nodeID}") == csiMockDriver+"/"+e.node.name
	})
	claim := `apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: csi}
spec:
  storageClassName: csi-mock
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 10Mi}}
---
`
	if out, errOut, err := e.cp.kubectlStdin(claim+storagePod("user", "csi", "echo "+word+" > /data/hello; sleep 3600"), "apply", "-f", "-"); err != nil {
		t.Fatalf("apply: %v\n%s%s", err, out, errOut)
	}
	testkit.Eventually(t, 90*time.Second, "user Running", func() bool { return e.jsonpath("get", "pod", "user", "{.status.phase}") == "Running" })
	pv = e.jsonpath("get", "pvc", "csi", "{.spec.volumeName}")
	handle = e.jsonpath("get", "pv", pv, "{.spec.csi.volumeHandle}")
	volDir = filepath.Join(e.dataDir, handle)
	testkit.Eventually(t, 30*time.Second, "the pod's write in the volume's directory", func() bool {
		b, err := os.ReadFile(filepath.Join(volDir, "hello"))
		return err == nil && strings.TrimSpace(string(b)) == word
	})
	return pv, handle, volDir
}

func (e *csiEnv) jsonpath(args ...string) string {
	out, _, _ := e.cp.kubectl(append(args[:len(args)-1:len(args)-1], "-o", "jsonpath="+args[len(args)-1])...)
	return out
}

// TestCSIExternalProvisioner: the upstream external-provisioner sidecar
// (built from the module proxy), running unchanged as a pod with
// in-cluster configuration beside the tests' mock driver, provisions a
// claim of the driver's class (CreateVolume) and deletes its volume with
// the claim (DeleteVolume). Using the volume in a pod needs the driver's
// node side and the node's CSI support (TestCSIDriver).
func TestCSIExternalProvisioner(t *testing.T) {
	e := deployCSIMock(t, "node-csi-prov", csiMock{})
	claim := `apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: csi}
spec:
  storageClassName: csi-mock
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 10Mi}}
`
	if out, errOut, err := e.cp.kubectlStdin(claim, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply: %v\n%s%s", err, out, errOut)
	}
	testkit.Eventually(t, 60*time.Second, "the claim Bound", func() bool { return e.jsonpath("get", "pvc", "csi", "{.status.phase}") == "Bound" })
	pv := e.jsonpath("get", "pvc", "csi", "{.spec.volumeName}")
	got := e.jsonpath("get", "pv", pv, `{.metadata.annotations.pv\.kubernetes\.io/provisioned-by} {.spec.csi.driver} {.spec.csi.volumeHandle} {.spec.capacity.storage} {.spec.persistentVolumeReclaimPolicy}`)
	if want := csiMockDriver + " " + csiMockDriver + " " + pv + " 10Mi Delete"; got != want {
		t.Errorf("the provisioned volume (provisioned-by driver handle capacity reclaim): %q, want %q", got, want)
	}
	logs, _, _ := e.cp.kubectl("-n", "csi-mock", "logs", "deployment/csi-mock-controller", "-c", "mock-driver")
	if !strings.Contains(logs, `"Method":"/csi.v1.Controller/CreateVolume"`) || !strings.Contains(logs, `"name":"`+pv+`"`) {
		t.Errorf("the driver's log lacks the CreateVolume of %s:\n%s", pv, logs)
	}
	e.cp.must("delete", "pvc", "csi")
	testkit.Eventually(t, 60*time.Second, "the volume deleted with the claim", func() bool {
		out, _, _ := e.cp.kubectl("get", "pv", pv, "--ignore-not-found", "-o", "name")
		return strings.TrimSpace(out) == ""
	})
	logs, _, _ = e.cp.kubectl("-n", "csi-mock", "logs", "deployment/csi-mock-controller", "-c", "mock-driver")
	if !strings.Contains(logs, `"Method":"/csi.v1.Controller/DeleteVolume"`) {
		t.Errorf("the driver's log lacks the DeleteVolume of %s:\n%s", pv, logs)
	}
	e.remove(t)
}

// TestCSIDriver: the mock driver's node side (driver and the tests'
// registrar, a privileged DaemonSet) registers through the node's
// plugins_registry (the CSINode lists the driver with the node's ID), a
// pod uses a claim the external-provisioner provisioned (staged and
// published by the driver: the pod's writes land in the volume's
// directory on the host), the pod's end unpublishes and unstages it, the
// claim's deletion deletes the volume and its directory, and the driver's
// removal deregisters it.
//
// It needs the node's CSI support (plugin registration, staging and
// publishing) and privileged containers that run on this host.
func TestCSIDriver(t *testing.T) {
	e := deployCSIMock(t, "node-csi", csiMock{node: true})
	// The node made the driver's Bidirectional host paths shared mounts
	// of their own, and leaves them (as the kubelet its root): they go
	// once the node is done with them.
	root := filepath.Join(e.node.dir, "root")
	t.Cleanup(func() { unmountSharedBinds(t, root) })
	t.Cleanup(func() {
		if t.Failed() {
			out, _, _ := e.cp.kubectl("-n", "csi-mock", "logs", "daemonset/csi-mock-node", "--all-containers", "--tail=60")
			t.Logf("the driver's node pod's logs:\n%s", out)
		}
	})
	pv, _, volDir := e.runClaimPod(t, "through-csi")
	nodeLogs := func() string {
		out, _, _ := e.cp.kubectl("-n", "csi-mock", "logs", "daemonset/csi-mock-node", "-c", "mock-driver")
		return out
	}
	for _, m := range []string{"NodeStageVolume", "NodePublishVolume"} {
		if logs := nodeLogs(); !strings.Contains(logs, `"Method":"/csi.v1.Node/`+m+`"`) {
			t.Errorf("the node driver's log lacks %s:\n%s", m, logs)
		}
	}

	e.cp.must("delete", "pod", "user")
	testkit.Eventually(t, 60*time.Second, "the volume unpublished and unstaged", func() bool {
		logs := nodeLogs()
		return strings.Contains(logs, `"Method":"/csi.v1.Node/NodeUnpublishVolume"`) && strings.Contains(logs, `"Method":"/csi.v1.Node/NodeUnstageVolume"`)
	})
	e.cp.must("delete", "pvc", "csi")
	testkit.Eventually(t, 60*time.Second, "the volume and its directory deleted with the claim", func() bool {
		out, _, _ := e.cp.kubectl("get", "pv", pv, "--ignore-not-found", "-o", "name")
		_, err := os.Stat(volDir)
		return strings.TrimSpace(out) == "" && os.IsNotExist(err)
	})
	e.remove(t)
	testkit.Eventually(t, 60*time.Second, "the driver deregistered from the CSINode", func() bool {
		return !strings.Contains(e.jsonpath("get", "csinode", e.node.name, "{.spec.drivers[*].name}"), csiMockDriver)
	})
}

// unmountSharedBinds detaches the shared bind mounts a node made of its
// pods and plugins directories for a driver's Bidirectional mounts.
func unmountSharedBinds(t testing.TB, root string) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Error(err)
		return
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == filepath.Join(root, "pods") || f[4] == filepath.Join(root, "plugins")) {
			if err := syscall.Unmount(f[4], syscall.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", f[4], err)
			}
		}
	}
}
