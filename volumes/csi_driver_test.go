package volumes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// testDriverEnv makes the test binary a CSI driver (TestMain): its value
// is the driver's configuration as JSON.
const testDriverEnv = "NODELET_TEST_CSI_DRIVER"

// testDriverConfig configures the test driver process.
type testDriverConfig struct {
	Name string
	// Socket is the driver's endpoint, Registration the registrar's
	// socket in the registration directory.
	Socket, Registration string
	// Backing holds a directory per volume (what NodeStageVolume bind
	// mounts) and calls.log, a JSON line per call.
	Backing string
	NodeID  string
}

func TestMain(m *testing.M) {
	if cfg := os.Getenv(testDriverEnv); cfg != "" {
		if err := runTestDriver(cfg); err != nil {
			fmt.Fprintln(os.Stderr, "test CSI driver:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runTestDriver serves a CSI driver (identity and node services, with
// bind mounts) and a registrar (pluginregistration) until SIGTERM, then
// removes both sockets as node-driver-registrar does.
func runTestDriver(raw string) error {
	var cfg testDriverConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		return err
	}
	d := &testDriver{cfg: cfg}
	drv, err := listenUnix(cfg.Socket)
	if err != nil {
		return err
	}
	reg, err := listenUnix(cfg.Registration)
	if err != nil {
		return err
	}
	ds := grpc.NewServer()
	csipb.RegisterIdentityServer(ds, d)
	csipb.RegisterNodeServer(ds, d)
	rs := grpc.NewServer()
	registerapi.RegisterRegistrationServer(rs, testRegistrar{d: d})
	go ds.Serve(drv)
	go rs.Serve(reg)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	<-ctx.Done()
	rs.Stop()
	ds.Stop()
	os.Remove(cfg.Registration)
	os.Remove(cfg.Socket)
	return nil
}

func listenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, err
	}
	os.Remove(path)
	return net.Listen("unix", path)
}

type testDriver struct {
	csipb.UnimplementedIdentityServer
	csipb.UnimplementedNodeServer
	cfg testDriverConfig
	mu  sync.Mutex
}

// testCall is one line of calls.log.
type testCall struct {
	Method, Volume, Path string
	PublishContext       map[string]string `json:",omitempty"`
	VolumeContext        map[string]string `json:",omitempty"`
	Registered           bool              `json:",omitempty"`
	Error                string            `json:",omitempty"`
}

func (d *testDriver) record(c testCall) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f, err := os.OpenFile(filepath.Join(d.cfg.Backing, "calls.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	b, _ := json.Marshal(c)
	f.Write(append(b, '\n'))
}

func (d *testDriver) GetPluginInfo(context.Context, *csipb.GetPluginInfoRequest) (*csipb.GetPluginInfoResponse, error) {
	return &csipb.GetPluginInfoResponse{Name: d.cfg.Name, VendorVersion: "0.1"}, nil
}

func (d *testDriver) Probe(context.Context, *csipb.ProbeRequest) (*csipb.ProbeResponse, error) {
	return &csipb.ProbeResponse{}, nil
}

func (d *testDriver) NodeGetInfo(context.Context, *csipb.NodeGetInfoRequest) (*csipb.NodeGetInfoResponse, error) {
	return &csipb.NodeGetInfoResponse{NodeId: d.cfg.NodeID, MaxVolumesPerNode: 5,
		AccessibleTopology: &csipb.Topology{Segments: map[string]string{"topology.test.csi/node": d.cfg.NodeID}}}, nil
}

func (d *testDriver) NodeGetCapabilities(context.Context, *csipb.NodeGetCapabilitiesRequest) (*csipb.NodeGetCapabilitiesResponse, error) {
	rpc := func(t csipb.NodeServiceCapability_RPC_Type) *csipb.NodeServiceCapability {
		return &csipb.NodeServiceCapability{Type: &csipb.NodeServiceCapability_Rpc{Rpc: &csipb.NodeServiceCapability_RPC{Type: t}}}
	}
	return &csipb.NodeGetCapabilitiesResponse{Capabilities: []*csipb.NodeServiceCapability{
		rpc(csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME), rpc(csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS)}}, nil
}

func (d *testDriver) NodeStageVolume(_ context.Context, r *csipb.NodeStageVolumeRequest) (*csipb.NodeStageVolumeResponse, error) {
	d.record(testCall{Method: "NodeStageVolume", Volume: r.VolumeId, Path: r.StagingTargetPath, PublishContext: r.PublishContext, VolumeContext: r.VolumeContext})
	if r.VolumeId == "" || r.StagingTargetPath == "" || r.VolumeCapability == nil {
		return nil, status.Error(codes.InvalidArgument, "volume ID, staging path and capability are required")
	}
	backing := filepath.Join(d.cfg.Backing, r.VolumeId)
	if err := os.MkdirAll(backing, 0o755); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := bindOnce(backing, r.StagingTargetPath, false); err != nil {
		return nil, err
	}
	return &csipb.NodeStageVolumeResponse{}, nil
}

func (d *testDriver) NodePublishVolume(_ context.Context, r *csipb.NodePublishVolumeRequest) (*csipb.NodePublishVolumeResponse, error) {
	d.record(testCall{Method: "NodePublishVolume", Volume: r.VolumeId, Path: r.TargetPath, PublishContext: r.PublishContext, VolumeContext: r.VolumeContext})
	src := r.StagingTargetPath
	if src == "" { // an inline volume: published straight from its directory
		src = filepath.Join(d.cfg.Backing, r.VolumeId)
		if err := os.MkdirAll(src, 0o755); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	} else if mounted, _ := isMountPoint(src); !mounted {
		return nil, status.Errorf(codes.FailedPrecondition, "staging path %s is not mounted", src)
	}
	if err := os.MkdirAll(r.TargetPath, 0o750); err != nil { // the SP makes the target
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := bindOnce(src, r.TargetPath, r.Readonly); err != nil {
		return nil, err
	}
	return &csipb.NodePublishVolumeResponse{}, nil
}

func (d *testDriver) NodeUnpublishVolume(_ context.Context, r *csipb.NodeUnpublishVolumeRequest) (*csipb.NodeUnpublishVolumeResponse, error) {
	d.record(testCall{Method: "NodeUnpublishVolume", Volume: r.VolumeId, Path: r.TargetPath})
	if err := unmountIfMounted(r.TargetPath); err != nil {
		return nil, err
	}
	if err := os.Remove(r.TargetPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csipb.NodeUnpublishVolumeResponse{}, nil
}

func (d *testDriver) NodeUnstageVolume(_ context.Context, r *csipb.NodeUnstageVolumeRequest) (*csipb.NodeUnstageVolumeResponse, error) {
	d.record(testCall{Method: "NodeUnstageVolume", Volume: r.VolumeId, Path: r.StagingTargetPath})
	if err := unmountIfMounted(r.StagingTargetPath); err != nil {
		return nil, err
	}
	return &csipb.NodeUnstageVolumeResponse{}, nil
}

func (d *testDriver) NodeGetVolumeStats(_ context.Context, r *csipb.NodeGetVolumeStatsRequest) (*csipb.NodeGetVolumeStatsResponse, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(r.VolumePath, &st); err != nil {
		return nil, status.Errorf(codes.NotFound, "statfs %s: %v", r.VolumePath, err)
	}
	bs := int64(st.Bsize)
	return &csipb.NodeGetVolumeStatsResponse{Usage: []*csipb.VolumeUsage{
		{Unit: csipb.VolumeUsage_BYTES, Total: int64(st.Blocks) * bs, Available: int64(st.Bavail) * bs, Used: int64(st.Blocks-st.Bfree) * bs},
		{Unit: csipb.VolumeUsage_INODES, Total: int64(st.Files), Available: int64(st.Ffree), Used: int64(st.Files - st.Ffree)},
	}}, nil
}

// bindOnce bind mounts src on dst unless dst is a mount already.
func bindOnce(src, dst string, readOnly bool) error {
	if mounted, err := isMountPoint(dst); err != nil {
		return status.Error(codes.Internal, err.Error())
	} else if mounted {
		return nil
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return status.Errorf(codes.Internal, "bind %s on %s: %v", src, dst, err)
	}
	if readOnly {
		if err := unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			return status.Errorf(codes.Internal, "remount %s read-only: %v", dst, err)
		}
	}
	return nil
}

func unmountIfMounted(dir string) error {
	if mounted, err := isMountPoint(dir); err != nil {
		return status.Error(codes.Internal, err.Error())
	} else if !mounted {
		return nil
	}
	if err := unix.Unmount(dir, 0); err != nil {
		return status.Errorf(codes.Internal, "unmount %s: %v", dir, err)
	}
	return nil
}

// testRegistrar is the registrar side of the driver (what
// node-driver-registrar serves).
type testRegistrar struct {
	registerapi.UnimplementedRegistrationServer
	d *testDriver
}

func (r testRegistrar) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: r.d.cfg.Name, Endpoint: r.d.cfg.Socket,
		SupportedVersions: []string{"1.0.0"}}, nil
}

func (r testRegistrar) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	r.d.record(testCall{Method: "NotifyRegistrationStatus", Registered: s.PluginRegistered, Error: s.Error})
	return &registerapi.RegistrationStatusResponse{}, nil
}
