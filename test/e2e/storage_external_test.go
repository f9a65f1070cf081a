package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/hosttools"
	"github.com/nodelet/nodelet/test/images"
	"github.com/nodelet/nodelet/test/testkit"
)

// inClusterAPIAddr is where pods of an inClusterNode reach the API server:
// the control plane advertises it (the default kubernetes Service's
// endpoint, a name of its certificate), and it exists only inside the
// node's namespace, on its loopback, where the test forwards it to the
// control plane on the host's loopback. 10.99.0.0/24 is never a node's
// subnet (nodeSubnet picks 10.99.1-250).
const inClusterAPIAddr = "10.99.0.1"

// startInClusterNode starts a control plane and a real node whose pods
// reach the API server with in-cluster configuration (the kubernetes
// Service, as programs written for Kubernetes expect), with the tests'
// busybox and the given image archives pre-loaded. It waits for the node
// to be Ready.
func startInClusterNode(t testing.TB, name string, archives ...func(dir string) error) (*controlPlane, *realNode) {
	t.Helper()
	imageDir := t.TempDir()
	if _, _, err := images.Busybox(imageDir); err != nil {
		t.Fatal(err)
	}
	for _, write := range archives {
		if err := write(imageDir); err != nil {
			t.Fatal(err)
		}
	}
	port := freePort(t)
	cp := startControlPlane(t, t.TempDir(), port, "--advertise-address", inClusterAPIAddr)
	node := startRealNode(t, cp, name, "--image-dir", imageDir) // the flag's last value wins
	if out, err := hosttools.Command("ip", "-n", node.netns, "addr", "add", inClusterAPIAddr+"/32", "dev", "lo").CombinedOutput(); err != nil {
		t.Fatalf("ip addr add %s in %s: %v: %s", inClusterAPIAddr, node.netns, err, out)
	}
	forwardIntoNetnsTo(t, "/run/netns/"+node.netns, fmt.Sprintf("%s:%d", inClusterAPIAddr, port), fmt.Sprintf("127.0.0.1:%d", port))
	testkit.Eventually(t, 60*time.Second, "node Ready", func() bool {
		out, _, _ := cp.kubectl("get", "node", node.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True"
	})
	return cp, node
}

// localPathProvisionerImage writes rancher's local-path-provisioner image,
// built from the module proxy (cached across runs, images.CacheDir).
func localPathProvisionerImage(dir string) error {
	_, err := images.LocalPathProvisionerImage(dir, images.CacheDir())
	return err
}

// deployLocalPathProvisioner applies rancher's manifest (testdata) with
// nodePath as the nodes' directory, and waits for the provisioner to run.
// It returns the manifest, for the delete.
func deployLocalPathProvisioner(t testing.TB, cp *controlPlane, nodePath string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/local-path-provisioner.yaml")
	if err != nil {
		t.Fatal(err)
	}
	manifest := strings.ReplaceAll(string(b), "NODE_PATH", nodePath)
	if out, errOut, err := cp.kubectlStdin(manifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply the local-path-provisioner: %v\n%s%s", err, out, errOut)
	}
	waitRolledOut(t, cp, "local-path-storage", "deployment/local-path-provisioner")
	return manifest
}

// waitRolledOut waits up to two minutes for kubectl rollout status of
// workload (kind/name) in namespace ns to succeed, and fails the test
// with the workload's logs if it does not.
func waitRolledOut(t testing.TB, cp *controlPlane, ns, workload string) {
	t.Helper()
	var out, errOut string
	var err error
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		// Short rounds: kubectl runs under a one-minute context.
		if out, errOut, err = cp.kubectl("-n", ns, "rollout", "status", workload, "--timeout=20s"); err == nil {
			return
		}
	}
	logs, _, _ := cp.kubectl("-n", ns, "logs", workload, "--all-containers")
	t.Fatalf("%s did not roll out: %v\n%s%s\nits logs:\n%s", workload, err, out, errOut, logs)
}

// removeLocalPathProvisioner deletes what deployLocalPathProvisioner
// applied (the namespace's deletion may take its ConfigMap before kubectl
// gets to it) and waits until no pod of any namespace is left.
func removeLocalPathProvisioner(t testing.TB, cp *controlPlane, manifest string) {
	t.Helper()
	if out, errOut, err := cp.kubectlStdin(manifest, "delete", "-f", "-", "--wait=false", "--ignore-not-found"); err != nil {
		t.Errorf("delete the local-path-provisioner: %v\n%s%s", err, out, errOut)
	}
	testkit.Eventually(t, 120*time.Second, "no pods and the provisioner's namespace gone", func() bool {
		out, _, _ := cp.kubectl("get", "pods", "-A", "-o", "name")
		ns, _, _ := cp.kubectl("get", "namespace", "local-path-storage", "--ignore-not-found", "-o", "name")
		return strings.TrimSpace(out) == "" && strings.TrimSpace(ns) == ""
	})
}

// TestExternalLocalPathProvisioner: rancher's local-path-provisioner,
// built from the module proxy and deployed with its own manifest through
// the real kubectl, runs as a pod with in-cluster configuration on a real
// node, provisions a claim's volume through its helper pod (a directory
// under its nodePathMap directory), the claim's pod writes into it, and
// deleting the claim deletes the volume and its directory (the teardown
// helper pod).
func TestExternalLocalPathProvisioner(t *testing.T) {
	cp, node := startInClusterNode(t, "node-ext-storage", localPathProvisionerImage)
	nodePath := filepath.Join(t.TempDir(), "local-path-provisioner")
	manifest := deployLocalPathProvisioner(t, cp, nodePath)
	jsonpath := func(args ...string) string {
		out, _, _ := cp.kubectl(append(args[:len(args)-1:len(args)-1], "-o", "jsonpath="+args[len(args)-1])...)
		return out
	}
	claim := `apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: external}
spec:
  storageClassName: local-path-external
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 10Mi}}
---
`
	if out, errOut, err := cp.kubectlStdin(claim+storagePod("user", "external", "echo provisioned > /data/hello; sleep 3600"), "apply", "-f", "-"); err != nil {
		t.Fatalf("apply: %v\n%s%s", err, out, errOut)
	}
	testkit.Eventually(t, 120*time.Second, "user Running", func() bool { return jsonpath("get", "pod", "user", "{.status.phase}") == "Running" })
	pv := jsonpath("get", "pvc", "external", "{.spec.volumeName}")
	got := jsonpath("get", "pv", pv, `{.metadata.annotations.pv\.kubernetes\.io/provisioned-by} {.spec.storageClassName} {.spec.persistentVolumeReclaimPolicy} {.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values[0]}`)
	if want := "rancher.io/local-path local-path-external Delete " + node.name; got != want {
		t.Errorf("the provisioned volume (provisioner class reclaim node): %q, want %q", got, want)
	}
	dir := jsonpath("get", "pv", pv, "{.spec.hostPath.path}")
	if !strings.HasPrefix(dir, nodePath+"/"+pv+"_default_external") {
		t.Fatalf("the volume's directory %q is not the provisioner's under %s", dir, nodePath)
	}
	testkit.Eventually(t, 30*time.Second, "the pod's data in the provisioned directory", func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "hello"))
		return err == nil && strings.TrimSpace(string(b)) == "provisioned"
	})
	if logs, _, _ := cp.kubectl("-n", "local-path-storage", "logs", "deployment/local-path-provisioner"); !strings.Contains(logs, "Volume "+pv+" has been created on "+node.name+":"+dir) {
		t.Errorf("the provisioner's logs lack its helper pod's success for %s:\n%s", pv, logs)
	}

	cp.must("delete", "pod", "user")
	cp.must("delete", "pvc", "external")
	testkit.Eventually(t, 120*time.Second, "the volume deleted and its directory removed", func() bool {
		out, _, _ := cp.kubectl("get", "pv", pv, "--ignore-not-found", "-o", "name")
		_, err := os.Stat(dir)
		return strings.TrimSpace(out) == "" && os.IsNotExist(err)
	})
	if logs, _, _ := cp.kubectl("-n", "local-path-storage", "logs", "deployment/local-path-provisioner"); !strings.Contains(logs, "Volume "+pv+" has been deleted on "+node.name+":"+dir) {
		t.Errorf("the provisioner's logs lack its teardown helper pod's success for %s:\n%s", pv, logs)
	}
	removeLocalPathProvisioner(t, cp, manifest)
	waitNoLeftovers(t, node)
}
