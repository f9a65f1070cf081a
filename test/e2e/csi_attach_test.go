package e2e

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/testkit"
)

// TestCSIAttach: the mock driver as a driver that attaches (its CSIDriver
// has attachRequired, its controller publishes) with the upstream
// external-attacher sidecar (built from the module proxy) beside it. For
// a pod's claim of the driver's class the control plane's attach/detach
// controller creates the VolumeAttachment of the volume and the node, the
// external-attacher attaches it (ControllerPublishVolume, its publish
// context in the attachment's status), the node stages and publishes only
// after that, with that publish context, and the pod runs and writes. The
// pod's end unpublishes and unstages the volume, the node stops reporting
// it in use, and the control plane detaches: it deletes the attachment,
// which the external-attacher lets go after ControllerUnpublishVolume.
func TestCSIAttach(t *testing.T) {
	e := deployCSIMock(t, "node-csi-attach", csiMock{node: true, attach: true})
	root := filepath.Join(e.node.dir, "root")
	t.Cleanup(func() { unmountSharedBinds(t, root) })
	controllerLogs := func(args ...string) string {
		out, _, _ := e.cp.kubectl(append([]string{"-n", "csi-mock", "logs", "deployment/csi-mock-controller", "-c", "mock-driver"}, args...)...)
		return out
	}
	nodeLogs := func(args ...string) string {
		out, _, _ := e.cp.kubectl(append([]string{"-n", "csi-mock", "logs", "daemonset/csi-mock-node", "-c", "mock-driver"}, args...)...)
		return out
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _, _ := e.cp.kubectl("-n", "csi-mock", "logs", "deployment/csi-mock-controller", "-c", "csi-attacher", "--tail=80")
			t.Logf("the external-attacher's log:\n%s", out)
			t.Logf("the controller driver's log:\n%s", controllerLogs("--tail=40"))
			t.Logf("the node driver's log:\n%s", nodeLogs("--tail=40"))
			out, _, _ = e.cp.kubectl("get", "volumeattachments", "-o", "yaml")
			t.Logf("the VolumeAttachments:\n%s", out)
		}
	})
	pv, handle, volDir := e.runClaimPod(t, "attached")

	// The attachment upstream's CSI attacher names, made by the control
	// plane (nothing here creates it) and attached by the external-attacher
	// (its finalizer, the driver's publish context).
	va := fmt.Sprintf("csi-%x", sha256.Sum256([]byte(handle+csiMockDriver+e.node.name)))
	device := "/dev/mock-" + handle
	got := e.jsonpath("get", "volumeattachment", va, `{.spec.attacher} {.spec.nodeName} {.spec.source.persistentVolumeName} {.status.attached} {.status.attachmentMetadata.devicePath} {.metadata.finalizers}`)
	if want := fmt.Sprintf(`%s %s %s true %s ["external-attacher/io-kubernetes-storage-mock"]`, csiMockDriver, e.node.name, pv, device); got != want {
		t.Errorf("the VolumeAttachment %s (attacher node volume attached devicePath finalizers): %q, want %q", va, got, want)
	}
	inUse := "kubernetes.io/csi/" + csiMockDriver + "^" + handle
	testkit.Eventually(t, 30*time.Second, "the volume in the node's volumesInUse and volumesAttached", func() bool {
		return e.jsonpath("get", "node", e.node.name, "{.status.volumesInUse[*]}") == inUse &&
			e.jsonpath("get", "node", e.node.name, "{.status.volumesAttached[*].name}") == inUse
	})
	publishedAt := logCallTime(t, controllerLogs("--timestamps"), "Controller/ControllerPublishVolume", `"volume_id":"`+handle+`"`, `"node_id":"`+e.node.name+`"`)
	logs := nodeLogs("--timestamps")
	for _, m := range []string{"Node/NodeStageVolume", "Node/NodePublishVolume"} {
		if at := logCallTime(t, logs, m, `"publish_context":{"devicePath":"`+device+`"}`); !publishedAt.IsZero() && !at.IsZero() && at.Before(publishedAt) {
			t.Errorf("%s at %s, before the ControllerPublishVolume at %s", m, at.Format(time.RFC3339Nano), publishedAt.Format(time.RFC3339Nano))
		}
	}

	e.cp.must("delete", "pod", "user")
	testkit.Eventually(t, 60*time.Second, "the volume unpublished and unstaged", func() bool {
		logs := nodeLogs()
		return strings.Contains(logs, `"Method":"/csi.v1.Node/NodeUnpublishVolume"`) && strings.Contains(logs, `"Method":"/csi.v1.Node/NodeUnstageVolume"`)
	})
	testkit.Eventually(t, 120*time.Second, "the VolumeAttachment deleted and the volume gone from the node's status", func() bool {
		out, _, _ := e.cp.kubectl("get", "volumeattachment", va, "--ignore-not-found", "-o", "name")
		return strings.TrimSpace(out) == "" && e.jsonpath("get", "node", e.node.name, "{.status.volumesInUse}{.status.volumesAttached}") == ""
	})
	logCallTime(t, controllerLogs("--timestamps"), "Controller/ControllerUnpublishVolume", `"volume_id":"`+handle+`"`, `"node_id":"`+e.node.name+`"`)

	e.cp.must("delete", "pvc", "csi")
	testkit.Eventually(t, 60*time.Second, "the volume and its directory deleted with the claim", func() bool {
		out, _, _ := e.cp.kubectl("get", "pv", pv, "--ignore-not-found", "-o", "name")
		_, err := os.Stat(volDir)
		return strings.TrimSpace(out) == "" && os.IsNotExist(err)
	})
	e.remove(t)
}

// logCallTime finds the first successful call of method (Service/Method)
// in a mock driver's log taken with --timestamps whose line holds every
// one of want, and returns the line's time; it fails the test without
// one.
func logCallTime(t *testing.T, logs, method string, want ...string) time.Time {
	t.Helper()
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, `"Method":"/csi.v1.`+method+`"`) || !strings.Contains(line, `"Error":""`) {
			continue
		}
		if !allIn(line, want) {
			continue
		}
		ts, _, _ := strings.Cut(line, " ")
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			t.Errorf("the time of %q: %v", line, err)
		}
		return at
	}
	t.Errorf("the driver's log lacks a successful %s with %q:\n%s", method, want, logs)
	return time.Time{}
}

func allIn(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
