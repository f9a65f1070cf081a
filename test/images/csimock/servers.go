package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/kubernetes-csi/csi-test/v5/driver"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// defaultName is the name csi-test's mock driver had.
const defaultName = "io.kubernetes.storage.mock"

// config is what the services serve.
type config struct {
	Name       string
	NodeID     string // empty: no node service
	DataDir    string
	Controller bool
	// Attach makes the controller publish (PUBLISH_UNPUBLISH_VOLUME), as
	// a driver whose CSIDriver has attachRequired does.
	Attach bool
}

func (c config) servers() *driver.CSIDriverServers {
	s := &driver.CSIDriverServers{Identity: identity{cfg: c}}
	if c.Controller {
		s.Controller = controller{cfg: c}
	}
	if c.NodeID != "" {
		s.Node = node{cfg: c}
	}
	return s
}

type identity struct {
	csi.UnimplementedIdentityServer
	cfg config
}

func (i identity) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: i.cfg.Name, VendorVersion: "v5.6.0-nodelet"}, nil
}

func (i identity) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	var caps []*csi.PluginCapability
	if i.cfg.Controller {
		caps = append(caps, &csi.PluginCapability{Type: &csi.PluginCapability_Service_{
			Service: &csi.PluginCapability_Service{Type: csi.PluginCapability_Service_CONTROLLER_SERVICE}}})
	}
	return &csi.GetPluginCapabilitiesResponse{Capabilities: caps}, nil
}

func (identity) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

type controller struct {
	csi.UnimplementedControllerServer
	cfg config
}

// validID refuses IDs that are not one plain file name (they name a
// directory under --data-dir).
func validID(id string) error {
	if id == "" || id == "." || id == ".." || strings.ContainsAny(id, "/\x00") {
		return status.Errorf(codes.InvalidArgument, "bad volume ID %q", id)
	}
	return nil
}

func (c controller) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if err := validID(req.GetName()); err != nil {
		return nil, err
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "no volume capabilities")
	}
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{
		VolumeId:      req.GetName(),
		CapacityBytes: req.GetCapacityRange().GetRequiredBytes(),
		VolumeContext: req.GetParameters(),
	}}, nil
}

func (c controller) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	if err := validID(req.GetVolumeId()); err != nil {
		return nil, err
	}
	if c.cfg.DataDir != "" {
		if err := os.RemoveAll(filepath.Join(c.cfg.DataDir, req.GetVolumeId())); err != nil {
			return nil, status.Errorf(codes.Internal, "remove the volume's directory: %v", err)
		}
	}
	return &csi.DeleteVolumeResponse{}, nil
}

func (c controller) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	types := []csi.ControllerServiceCapability_RPC_Type{csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME}
	if c.cfg.Attach {
		types = append(types, csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME)
	}
	var caps []*csi.ControllerServiceCapability
	for _, t := range types {
		caps = append(caps, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{
			Rpc: &csi.ControllerServiceCapability_RPC{Type: t}}})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

// ControllerPublishVolume "attaches" the volume to the node: nothing
// happens but the publish context the node gets in NodeStageVolume and
// NodePublishVolume, a device path named after the volume.
func (c controller) ControllerPublishVolume(_ context.Context, req *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	if !c.cfg.Attach {
		return nil, status.Error(codes.Unimplemented, "the driver does not attach (no --attach)")
	}
	if err := validID(req.GetVolumeId()); err != nil {
		return nil, err
	}
	if req.GetNodeId() == "" || req.GetVolumeCapability() == nil {
		return nil, status.Error(codes.InvalidArgument, "node ID and volume capability are required")
	}
	return &csi.ControllerPublishVolumeResponse{PublishContext: map[string]string{
		"devicePath": devicePath(req.GetVolumeId())}}, nil
}

// ControllerUnpublishVolume "detaches" the volume: always done.
func (c controller) ControllerUnpublishVolume(_ context.Context, req *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	if !c.cfg.Attach {
		return nil, status.Error(codes.Unimplemented, "the driver does not attach (no --attach)")
	}
	if err := validID(req.GetVolumeId()); err != nil {
		return nil, err
	}
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}

// devicePath is the device path ControllerPublishVolume returns for a
// volume in the publish context.
func devicePath(volumeID string) string { return "/dev/mock-" + volumeID }

func (c controller) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if err := validID(req.GetVolumeId()); err != nil {
		return nil, err
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeCapabilities: req.GetVolumeCapabilities()}}, nil
}

type node struct {
	csi.UnimplementedNodeServer
	cfg config
}

func (n node) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: n.cfg.NodeID}, nil
}

func (n node) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{Capabilities: []*csi.NodeServiceCapability{{
		Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{
			Type: csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME}}}}}, nil
}

func (n node) NodeStageVolume(_ context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	if err := validID(req.GetVolumeId()); err != nil {
		return nil, err
	}
	if n.cfg.DataDir == "" {
		return nil, status.Error(codes.FailedPrecondition, "the driver has no --data-dir")
	}
	if req.GetStagingTargetPath() == "" {
		return nil, status.Error(codes.InvalidArgument, "no staging target path")
	}
	src := filepath.Join(n.cfg.DataDir, req.GetVolumeId())
	if err := os.MkdirAll(src, 0o777); err != nil {
		return nil, status.Errorf(codes.Internal, "make the volume's directory: %v", err)
	}
	if err := bindMount(src, req.GetStagingTargetPath(), false); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.NodeStageVolumeResponse{}, nil
}

func (n node) NodeUnstageVolume(_ context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	if err := validID(req.GetVolumeId()); err != nil {
		return nil, err
	}
	if err := unmount(req.GetStagingTargetPath()); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.NodeUnstageVolumeResponse{}, nil
}

func (n node) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	if err := validID(req.GetVolumeId()); err != nil {
		return nil, err
	}
	if req.GetStagingTargetPath() == "" || req.GetTargetPath() == "" {
		return nil, status.Error(codes.InvalidArgument, "staging and target paths are required")
	}
	if err := bindMount(req.GetStagingTargetPath(), req.GetTargetPath(), req.GetReadonly()); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

func (n node) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	if err := validID(req.GetVolumeId()); err != nil {
		return nil, err
	}
	if err := unmount(req.GetTargetPath()); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := os.Remove(req.GetTargetPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, status.Errorf(codes.Internal, "remove %s: %v", req.GetTargetPath(), err)
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}
