// Command csiregistrar is the tests' node-driver-registrar (which the Go
// module proxy does not serve): it registers a CSI driver with the node's
// agent through k8s.io/kubelet's pluginregistration API, as upstream's
// sidecar does. It asks the driver its name at --csi-address (retrying
// until the driver answers), then serves Registration on
// PLUGIN-REGISTRATION-PATH/NAME-reg.sock: GetInfo names a CSIPlugin with
// the driver's socket as the node sees it (--kubelet-registration-path)
// and CSI version 1.0.0; a NotifyRegistrationStatus that reports a failed
// registration ends the registrar with an error, so its container
// restarts. On SIGTERM it removes its socket (the node then deregisters
// the driver).
//
//	csiregistrar --csi-address /csi/csi.sock \
//	  --kubelet-registration-path ROOT-DIR/plugins/DRIVER/csi.sock \
//	  --plugin-registration-path /registration
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// config is the registrar's flags.
type config struct {
	CSIAddress              string // the driver's socket, to ask its name
	DriverName              string // instead of asking
	KubeletRegistrationPath string // the driver's socket on the node
	PluginRegistrationPath  string // the node's registration directory, as mounted
}

func main() {
	klog.InitFlags(nil)
	var cfg config
	flag.StringVar(&cfg.CSIAddress, "csi-address", "/csi/csi.sock", "the CSI driver's socket in this container, asked for the driver's name")
	flag.StringVar(&cfg.DriverName, "driver-name", "", "the driver's name; when set, the driver is not asked")
	flag.StringVar(&cfg.KubeletRegistrationPath, "kubelet-registration-path", "", "the CSI driver's socket as the node's agent reaches it (required)")
	flag.StringVar(&cfg.PluginRegistrationPath, "plugin-registration-path", "/registration", "the node's plugin registration directory (ROOT-DIR/plugins_registry), as mounted here")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		klog.ErrorS(err, "csiregistrar")
		os.Exit(1)
	}
}

// run registers the driver and serves until ctx ends (nil) or the node
// reports a failed registration (an error).
func run(ctx context.Context, cfg config) error {
	if cfg.KubeletRegistrationPath == "" {
		return errors.New("--kubelet-registration-path is required")
	}
	name := cfg.DriverName
	if name == "" {
		var err error
		if name, err = driverName(ctx, cfg.CSIAddress); err != nil {
			return err
		}
	}
	socket := filepath.Join(cfg.PluginRegistrationPath, name+"-reg.sock")
	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove the stale socket %s: %w", socket, err)
	}
	ln, err := net.Listen("unix", socket)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", socket, err)
	}
	defer os.Remove(socket)
	failed := make(chan error, 1)
	srv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(srv, &registrar{name: name, endpoint: cfg.KubeletRegistrationPath, failed: failed})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	klog.InfoS("registration socket serving", "driver", name, "socket", socket, "endpoint", cfg.KubeletRegistrationPath)
	select {
	case <-ctx.Done():
		srv.Stop()
		return nil
	case err := <-failed:
		srv.GracefulStop() // the node gets its answer first
		return err
	case err := <-served:
		return fmt.Errorf("serve on %s: %w", socket, err)
	}
}

// registrar answers the node's plugin watcher.
type registrar struct {
	registerapi.UnimplementedRegistrationServer
	name, endpoint string
	failed         chan<- error
}

func (r *registrar) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	klog.InfoS("GetInfo", "driver", r.name)
	return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: r.name, Endpoint: r.endpoint,
		SupportedVersions: []string{"1.0.0"}}, nil
}

func (r *registrar) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if st.PluginRegistered {
		klog.InfoS("registered with the node", "driver", r.name)
		return &registerapi.RegistrationStatusResponse{}, nil
	}
	klog.ErrorS(nil, "the node refused the registration", "driver", r.name, "error", st.Error)
	select {
	case r.failed <- fmt.Errorf("registration of %s failed: %s", r.name, st.Error):
	default:
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

// driverName asks the driver at its socket for its name, once a second
// until it answers or ctx ends (the driver's container may start later).
func driverName(ctx context.Context, address string) (string, error) {
	conn, err := grpc.NewClient("unix://"+address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return "", fmt.Errorf("connect to the driver at %s: %w", address, err)
	}
	defer conn.Close()
	client := csi.NewIdentityClient(conn)
	for {
		callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		info, err := client.GetPluginInfo(callCtx, &csi.GetPluginInfoRequest{})
		cancel()
		if err == nil && info.GetName() != "" {
			return info.GetName(), nil
		}
		klog.InfoS("waiting for the driver", "address", address, "error", err)
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("the driver at %s did not tell its name: %w", address, errors.Join(err, ctx.Err()))
		case <-time.After(time.Second):
		}
	}
}
