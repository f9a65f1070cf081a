package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/testkit"
)

// storagePod writes or reads /data/hello in a claim.
func storagePod(name, claim, cmd string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox:1.36
    command: ["sh", "-c", %q]
    volumeMounts: [{name: data, mountPath: /data}]
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: %s}
`, name, cmd, claim)
}

// TestPersistentStorage: claims through the real kubectl on a real node:
// static binding with data outliving its pod, the default local-path
// class provisioned on first use, kept mounted across a nodelet restart
// and its directory removed with the claim, a claim in use held by its protection finalizer, and a Retain
// volume left Released.
func TestPersistentStorage(t *testing.T) {
	cp := startControlPlane(t, t.TempDir(), freePort(t))
	node := startRealNode(t, cp, "node-storage", "--volume-stats-agg-period=1s")
	testkit.Eventually(t, 60*time.Second, "node Ready", func() bool {
		out, _, _ := cp.kubectl("get", "node", node.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True"
	})
	apply := func(manifest string) {
		t.Helper()
		if out, errOut, err := cp.kubectlStdin(manifest, "apply", "-f", "-"); err != nil {
			t.Fatalf("apply: %v\n%s%s", err, out, errOut)
		}
	}
	jsonpath := func(args ...string) string {
		out, _, _ := cp.kubectl(append(args[:len(args)-1:len(args)-1], "-o", "jsonpath="+args[len(args)-1])...)
		return out
	}
	testkit.Eventually(t, 30*time.Second, "the default class", func() bool {
		out, _, _ := cp.kubectl("get", "storageclass", "--no-headers")
		return strings.Contains(out, "local-path (default)") && strings.Contains(out, "nodelet.io/local-path") &&
			strings.Contains(out, "WaitForFirstConsumer")
	})
	staticDir := filepath.Join(t.TempDir(), "static")
	b, err := os.ReadFile("testdata/storage.yaml")
	if err != nil {
		t.Fatal(err)
	}
	apply(strings.ReplaceAll(string(b), "STATIC_DIR", staticDir))

	t.Run("static binding", func(t *testing.T) {
		testkit.Eventually(t, 30*time.Second, "static claim Bound", func() bool {
			return jsonpath("get", "pvc", "static", "{.status.phase} {.spec.volumeName}") == "Bound static-pv"
		})
		apply(storagePod("writer", "static", "echo kept > /data/hello"))
		testkit.Eventually(t, 60*time.Second, "writer Succeeded", func() bool { return jsonpath("get", "pod", "writer", "{.status.phase}") == "Succeeded" })
		cp.must("delete", "pod", "writer")
		apply(storagePod("reader", "static", "cat /data/hello"))
		testkit.Eventually(t, 60*time.Second, "reader Succeeded", func() bool { return jsonpath("get", "pod", "reader", "{.status.phase}") == "Succeeded" })
		if out := strings.TrimSpace(cp.must("logs", "reader")); out != "kept" {
			t.Errorf("the second pod read %q, want what the first wrote", out)
		}
		cp.must("delete", "pod", "reader")
	})
	t.Run("claim in use is held", func(t *testing.T) {
		apply(storagePod("holder", "static", "sleep 3600"))
		testkit.Eventually(t, 60*time.Second, "holder Running", func() bool { return jsonpath("get", "pod", "holder", "{.status.phase}") == "Running" })
		cp.must("delete", "pvc", "static", "--wait=false")
		time.Sleep(2 * time.Second)
		if got := jsonpath("get", "pvc", "static", "{.metadata.deletionTimestamp} {.metadata.finalizers}"); !strings.Contains(got, "kubernetes.io/pvc-protection") || strings.HasPrefix(got, " ") {
			t.Errorf("the claim in use (deletionTimestamp finalizers): %q, want it Terminating with its protection", got)
		}
		cp.must("delete", "pod", "holder")
		testkit.Eventually(t, 60*time.Second, "the claim gone once its pod is", func() bool {
			out, _, _ := cp.kubectl("get", "pvc", "static", "--ignore-not-found", "-o", "name")
			return strings.TrimSpace(out) == ""
		})
		testkit.Eventually(t, 30*time.Second, "the Retain volume Released", func() bool {
			return jsonpath("get", "pv", "static-pv", "{.status.phase}") == "Released"
		})
		if b, err := os.ReadFile(filepath.Join(staticDir, "hello")); err != nil || strings.TrimSpace(string(b)) != "kept" {
			t.Errorf("the Retain volume's data: %q, %v", b, err)
		}
	})
	t.Run("default class provisioned on first use", func(t *testing.T) {
		time.Sleep(time.Second)
		if got := jsonpath("get", "pvc", "dynamic", "{.status.phase} {.spec.storageClassName}"); got != "Pending local-path" {
			t.Errorf("the claim before any pod (phase class): %q, want Pending of the default class", got)
		}
		apply(storagePod("user", "dynamic", "echo provisioned > /data/hello; sleep 3600"))
		testkit.Eventually(t, 60*time.Second, "user Running", func() bool { return jsonpath("get", "pod", "user", "{.status.phase}") == "Running" })
		pv := jsonpath("get", "pvc", "dynamic", "{.spec.volumeName}")
		if got := jsonpath("get", "pv", pv, "{.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values[0]} {.spec.persistentVolumeReclaimPolicy}"); !strings.HasSuffix(got, " Delete") || strings.HasPrefix(got, " ") {
			t.Errorf("the provisioned volume (node reclaim): %q", got)
		}
		dir := jsonpath("get", "pv", pv, "{.spec.local.path}")
		if !strings.HasPrefix(dir, filepath.Join(node.dir, "root", "storage")+"/") {
			t.Fatalf("the volume's directory %q is not under the node's local-path directory", dir)
		}
		testkit.Eventually(t, 30*time.Second, "the pod's data in the node's directory", func() bool {
			b, err := os.ReadFile(filepath.Join(dir, "hello"))
			return err == nil && strings.TrimSpace(string(b)) == "provisioned"
		})
		// A nodelet restart keeps the running pod and its mount.
		before := jsonpath("get", "pod", "user", "{.status.containerStatuses[0].containerID} {.status.containerStatuses[0].restartCount}")
		node.stop()
		node.start()
		testkit.Eventually(t, 60*time.Second, "the restarted node Ready", func() bool {
			return jsonpath("get", "node", node.name, `{.status.conditions[?(@.type=="Ready")].status}`) == "True"
		})
		testkit.Eventually(t, 30*time.Second, "the volume readable after the restart", func() bool {
			out, _, err := cp.kubectl("exec", "user", "--", "cat", "/data/hello")
			return err == nil && strings.TrimSpace(out) == "provisioned"
		})
		if after := jsonpath("get", "pod", "user", "{.status.containerStatuses[0].containerID} {.status.containerStatuses[0].restartCount}"); after != before {
			t.Errorf("the pod's container across the nodelet's restart: %q, then %q", before, after)
		}
		cp.must("delete", "pod", "user")
		cp.must("delete", "pvc", "dynamic")
		testkit.Eventually(t, 60*time.Second, "the volume deleted and its directory removed", func() bool {
			out, _, _ := cp.kubectl("get", "pv", pv, "--ignore-not-found", "-o", "name")
			_, err := os.Stat(dir)
			return strings.TrimSpace(out) == "" && os.IsNotExist(err)
		})
		testkit.Eventually(t, 30*time.Second, "the node's cleanup list drained", func() bool {
			return jsonpath("get", "node", node.name, `{.metadata.annotations.nodelet\.io/local-path-cleanup}`) == ""
		})
	})

	t.Run("fsGroup and volume stats", func(t *testing.T) { testClaimOwnershipAndStats(t, cp, node.name) })
	t.Run("generic ephemeral volume", func(t *testing.T) {
		apply(ephemeralVolumePod)
		testkit.Eventually(t, 60*time.Second, "eph Running", func() bool { return jsonpath("get", "pod", "eph", "{.status.phase}") == "Running" })
		if got := jsonpath("get", "pvc", "eph-scratch", "{.status.phase} {.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}"); got != "Bound Pod/eph" {
			t.Errorf("the ephemeral volume's claim (phase owner): %q", got)
		}
		pv := jsonpath("get", "pvc", "eph-scratch", "{.spec.volumeName}")
		cp.must("delete", "pod", "eph")
		testkit.Eventually(t, 90*time.Second, "the claim and its volume gone with the pod", func() bool {
			out, _, _ := cp.kubectl("get", "pvc/eph-scratch", "pv/"+pv, "--ignore-not-found", "-o", "name")
			return strings.TrimSpace(out) == ""
		})
	})
	t.Run("StatefulSet keeps its data", func(t *testing.T) {
		apply(statefulSetWithClaims)
		testkit.Eventually(t, 90*time.Second, "db-0 Ready", func() bool {
			return jsonpath("get", "pod", "db-0", `{.status.conditions[?(@.type=="Ready")].status}`) == "True"
		})
		cp.must("exec", "db-0", "--", "sh", "-c", "echo mine > /data/hello")
		uid := jsonpath("get", "pod", "db-0", "{.metadata.uid}")
		cp.must("delete", "pod", "db-0")
		testkit.Eventually(t, 90*time.Second, "a new db-0 Ready", func() bool {
			return jsonpath("get", "pod", "db-0", `{.metadata.uid} {.status.conditions[?(@.type=="Ready")].status}`) != uid+" True" &&
				jsonpath("get", "pod", "db-0", `{.status.conditions[?(@.type=="Ready")].status}`) == "True"
		})
		if out := strings.TrimSpace(cp.must("exec", "db-0", "--", "cat", "/data/hello")); out != "mine" {
			t.Errorf("the new db-0 read %q, want what the old one wrote", out)
		}
		cp.must("delete", "statefulset", "db")
		cp.must("delete", "pvc", "data-db-0", "--wait=false")
	})

	cp.must("delete", "pv", "static-pv", "--wait=false")
	testkit.Eventually(t, 60*time.Second, "no pods", func() bool {
		out, _, _ := cp.kubectl("get", "pods", "-o", "name")
		return strings.TrimSpace(out) == ""
	})
	waitNoLeftovers(t, node)
}

const statefulSetWithClaims = `apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
spec:
  serviceName: db
  replicas: 1
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: busybox:1.36
        command: ["sleep", "3600"]
        volumeMounts: [{name: data, mountPath: /data}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 10Mi}}
`

const ephemeralVolumePod = `apiVersion: v1
kind: Pod
metadata:
  name: eph
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox:1.36
    command: ["sh", "-c", "echo scratch > /scratch/x; sleep 3600"]
    volumeMounts: [{name: scratch, mountPath: /scratch}]
  volumes:
  - name: scratch
    ephemeral:
      volumeClaimTemplate:
        spec:
          accessModes: [ReadWriteOnce]
          resources: {requests: {storage: 10Mi}}
`

// testClaimOwnershipAndStats: a class's nodePath places its volumes; a
// claim's volume takes the pod's fsGroup, and the node reports its usage
// in the Summary API and as kubelet_volume_stats_* under the claim's
// name; the directory goes with the claim.
func testClaimOwnershipAndStats(t *testing.T, cp *controlPlane, nodeName string) {
	nodePath := t.TempDir()
	if out, errOut, err := cp.kubectlStdin(`apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local-disk}
provisioner: nodelet.io/local-path
volumeBindingMode: WaitForFirstConsumer
parameters: {nodePath: `+nodePath+`}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: owned}
spec:
  storageClassName: local-disk
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: owner}
spec:
  terminationGracePeriodSeconds: 1
  securityContext: {fsGroup: 2345, fsGroupChangePolicy: OnRootMismatch}
  containers:
  - name: main
    image: busybox:1.36
    command: ["sh", "-c", "head -c 300000 /dev/zero > /data/blob; sleep 3600"]
    securityContext: {runAsUser: 1000}
    volumeMounts: [{name: data, mountPath: /data}]
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: owned}
`, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply: %v\n%s%s", err, out, errOut)
	}
	defer cp.kubectl("delete", "pod/owner", "pvc/owned", "storageclass/local-disk", "--wait=false")
	testkit.Eventually(t, 60*time.Second, "owner Running", func() bool {
		out, _, _ := cp.kubectl("get", "pod", "owner", "-o", "jsonpath={.status.phase}")
		return out == "Running"
	})
	dir := strings.TrimSpace(cp.must("get", "pv", strings.TrimSpace(cp.must("get", "pvc", "owned", "-o", "jsonpath={.spec.volumeName}")),
		"-o", "jsonpath={.spec.local.path}"))
	if filepath.Dir(dir) != nodePath {
		t.Errorf("the volume's directory %q is not in the class's nodePath %s", dir, nodePath)
	}
	// User 1000 could write only through the group.
	if out := strings.TrimSpace(cp.must("exec", "owner", "--", "stat", "-c", "%g %A", "/data")); !strings.HasPrefix(out, "2345 drwxrws") {
		t.Errorf("the volume's group and mode: %q, want group 2345 with rws", out)
	}
	if out := strings.TrimSpace(cp.must("exec", "owner", "--", "stat", "-c", "%g %s", "/data/blob")); out != "2345 300000" {
		t.Errorf("the file user 1000 wrote (group size): %q", out)
	}
	summary := "/api/v1/nodes/" + nodeName + "/proxy/stats/summary"
	var last string
	defer func() {
		if t.Failed() {
			t.Logf("last summary: %s", last)
		}
	}()
	testkit.Eventually(t, 30*time.Second, "the claim's volume in the summary", func() bool {
		out, _, _ := cp.kubectl("get", "--raw", summary)
		last = out
		var s struct {
			Pods []struct {
				PodRef      struct{ Name string }
				VolumeStats []struct {
					Name      string
					PVCRef    *struct{ Name, Namespace string }
					UsedBytes uint64
				} `json:"volume"`
			}
		}
		if json.Unmarshal([]byte(out), &s) != nil {
			return false
		}
		for _, p := range s.Pods {
			for _, v := range p.VolumeStats {
				if p.PodRef.Name == "owner" && v.Name == "data" && v.PVCRef != nil && v.PVCRef.Name == "owned" && v.UsedBytes >= 300000 {
					return true
				}
			}
		}
		return false
	})
	testkit.Eventually(t, 30*time.Second, "kubelet_volume_stats_used_bytes of the claim", func() bool {
		out, _, _ := cp.kubectl("get", "--raw", "/api/v1/nodes/"+nodeName+"/proxy/metrics")
		return strings.Contains(out, `kubelet_volume_stats_used_bytes{namespace="default",persistentvolumeclaim="owned"}`)
	})
	cp.must("delete", "pod", "owner")
	cp.must("delete", "pvc", "owned")
	testkit.Eventually(t, 60*time.Second, "the volume's directory removed from the class's nodePath", func() bool {
		_, err := os.Stat(dir)
		return os.IsNotExist(err)
	})
}
