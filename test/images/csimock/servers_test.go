package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/kubernetes-csi/csi-test/v5/driver"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/nodelet/nodelet/test/testkit"
)

// serve starts the driver's services on a socket in a temp dir.
func serve(t *testing.T, cfg config) *grpc.ClientConn {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "csi.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	d := driver.NewCSIDriver(cfg.servers())
	if err := d.Start(ln); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

var mountCap = []*csi.VolumeCapability{{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
	AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}}

// A volume's life through the driver as the external-provisioner and a
// node call it: created, staged and published with real bind mounts (a
// write at the target lands in the volume's directory), unpublished,
// unstaged and deleted with its directory; every call twice, as retries
// come.
func TestVolumeLife(t *testing.T) {
	testkit.RequireRoot(t, "the node service bind-mounts")
	data, pods := t.TempDir(), t.TempDir()
	conn := serve(t, config{Name: defaultName, NodeID: "node-1", DataDir: data, Controller: true})
	ctx := context.Background()
	id, ctl, node := csi.NewIdentityClient(conn), csi.NewControllerClient(conn), csi.NewNodeClient(conn)

	if info, err := id.GetPluginInfo(ctx, &csi.GetPluginInfoRequest{}); err != nil || info.Name != defaultName {
		t.Fatalf("GetPluginInfo = %v, %v", info, err)
	}
	if ni, err := node.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{}); err != nil || ni.NodeId != "node-1" {
		t.Fatalf("NodeGetInfo = %v, %v", ni, err)
	}
	var vol *csi.Volume
	for range 2 {
		resp, err := ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: mountCap,
			CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 20}})
		if err != nil {
			t.Fatalf("CreateVolume: %v", err)
		}
		vol = resp.Volume
	}
	if vol.VolumeId != "pvc-1" || vol.CapacityBytes != 1<<20 {
		t.Fatalf("the volume: %v", vol)
	}
	staging, target := filepath.Join(pods, "staging"), filepath.Join(pods, "target")
	t.Cleanup(func() { // after a failure half-way
		unix.Unmount(target, unix.MNT_DETACH)
		unix.Unmount(staging, unix.MNT_DETACH)
	})
	for range 2 {
		if _, err := node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: vol.VolumeId, StagingTargetPath: staging, VolumeCapability: mountCap[0]}); err != nil {
			t.Fatalf("NodeStageVolume: %v", err)
		}
		if _, err := node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: vol.VolumeId, StagingTargetPath: staging, TargetPath: target, VolumeCapability: mountCap[0]}); err != nil {
			t.Fatalf("NodePublishVolume: %v", err)
		}
	}
	if err := os.WriteFile(filepath.Join(target, "hello"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(data, "pvc-1", "hello")); err != nil || string(b) != "hi" {
		t.Fatalf("the write at the target in the volume's directory: %q, %v", b, err)
	}
	for range 2 {
		if _, err := node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: vol.VolumeId, TargetPath: target}); err != nil {
			t.Fatalf("NodeUnpublishVolume: %v", err)
		}
		if _, err := node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: vol.VolumeId, StagingTargetPath: staging}); err != nil {
			t.Fatalf("NodeUnstageVolume: %v", err)
		}
	}
	for _, p := range []string{staging, target} {
		if m, err := isMountPoint(p); err != nil || m {
			t.Errorf("%s still mounted (%v)", p, err)
		}
	}
	for range 2 {
		if _, err := ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: vol.VolumeId}); err != nil {
			t.Fatalf("DeleteVolume: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(data, "pvc-1")); !os.IsNotExist(err) {
		t.Errorf("the volume's directory after DeleteVolume: %v", err)
	}
	if _, err := ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "../x", VolumeCapabilities: mountCap}); err == nil {
		t.Error("a volume named ../x was created")
	}
}

func TestUnescapeOctal(t *testing.T) {
	if got := unescapeOctal(`/a\040b\134c`); got != `/a b\c` {
		t.Errorf("unescapeOctal = %q", got)
	}
}

func hasCapability(caps []*csi.ControllerServiceCapability, want csi.ControllerServiceCapability_RPC_Type) bool {
	for _, c := range caps {
		if c.GetRpc().GetType() == want {
			return true
		}
	}
	return false
}

// With --attach the controller publishes as the external-attacher calls
// it (every call twice, as retries come): the publish context names the
// volume's device path, and unpublishing succeeds. Without, it neither
// advertises PUBLISH_UNPUBLISH_VOLUME nor publishes.
func TestControllerPublish(t *testing.T) {
	ctx := context.Background()
	ctl := csi.NewControllerClient(serve(t, config{Name: defaultName, Controller: true, Attach: true}))
	caps, err := ctl.ControllerGetCapabilities(ctx, &csi.ControllerGetCapabilitiesRequest{})
	if err != nil || !hasCapability(caps.Capabilities, csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME) ||
		!hasCapability(caps.Capabilities, csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME) {
		t.Fatalf("ControllerGetCapabilities = %v, %v; want CREATE_DELETE_VOLUME and PUBLISH_UNPUBLISH_VOLUME", caps, err)
	}
	for range 2 {
		resp, err := ctl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: "pvc-1", NodeId: "node-1",
			VolumeCapability: mountCap[0]})
		if err != nil || resp.PublishContext["devicePath"] != "/dev/mock-pvc-1" || len(resp.PublishContext) != 1 {
			t.Fatalf("ControllerPublishVolume = %v, %v; want the publish context devicePath=/dev/mock-pvc-1", resp, err)
		}
	}
	for range 2 {
		if _, err := ctl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: "pvc-1", NodeId: "node-1"}); err != nil {
			t.Fatalf("ControllerUnpublishVolume: %v", err)
		}
	}
	for _, req := range []*csi.ControllerPublishVolumeRequest{
		{VolumeId: "../x", NodeId: "node-1", VolumeCapability: mountCap[0]},
		{VolumeId: "pvc-1", VolumeCapability: mountCap[0]},
		{VolumeId: "pvc-1", NodeId: "node-1"},
	} {
		if _, err := ctl.ControllerPublishVolume(ctx, req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("ControllerPublishVolume(%v) = %v, want InvalidArgument", req, err)
		}
	}

	plain := csi.NewControllerClient(serve(t, config{Name: defaultName, Controller: true}))
	caps, err = plain.ControllerGetCapabilities(ctx, &csi.ControllerGetCapabilitiesRequest{})
	if err != nil || hasCapability(caps.Capabilities, csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME) {
		t.Errorf("ControllerGetCapabilities without --attach = %v, %v; want no PUBLISH_UNPUBLISH_VOLUME", caps, err)
	}
	if _, err := plain.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: "pvc-1", NodeId: "node-1",
		VolumeCapability: mountCap[0]}); status.Code(err) != codes.Unimplemented {
		t.Errorf("ControllerPublishVolume without --attach = %v, want Unimplemented", err)
	}
}
