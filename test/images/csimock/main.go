// Command csimock is the tests' CSI driver: the csi-test/v5 module's mock
// driver harness (package driver: the gRPC server, its request log and
// secret checks), which the module serves without a command of its own,
// given identity, controller and node services written here. The
// controller keeps no state of its own: a volume's ID is its name, so the
// external-provisioner's retries and a restarted driver agree. The node
// really mounts: NodeStageVolume bind-mounts the volume's directory under
// --data-dir onto the staging path, NodePublishVolume the staging path
// onto the pod's target, so a pod's writes land in DATA-DIR/VOLUME-ID on
// the host. With --attach the controller publishes as well, for a
// CSIDriver with attachRequired: ControllerPublishVolume answers the
// publish context {"devicePath": "/dev/mock-VOLUME-ID"}, which the node
// passes on to NodeStageVolume and NodePublishVolume, and
// ControllerUnpublishVolume succeeds.
//
//	csimock --endpoint unix:///csi/csi.sock --node-id NODE --data-dir /var/lib/csi-mock
//
// The endpoint may come from $CSI_ENDPOINT as well, as the CSI sidecars'
// examples set it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/kubernetes-csi/csi-test/v5/driver"
	"k8s.io/klog/v2"
)

func main() {
	if err := run(); err != nil {
		klog.ErrorS(err, "csimock")
		os.Exit(1)
	}
}

func run() error {
	klog.InitFlags(nil)
	cfg := config{Name: defaultName}
	endpoint := flag.String("endpoint", os.Getenv("CSI_ENDPOINT"), "the driver's socket, unix:///PATH (default $CSI_ENDPOINT)")
	flag.StringVar(&cfg.Name, "name", cfg.Name, "the driver's name")
	flag.StringVar(&cfg.NodeID, "node-id", os.Getenv("NODE_NAME"), "the node's ID for NodeGetInfo (default $NODE_NAME); empty serves no node service")
	flag.StringVar(&cfg.DataDir, "data-dir", "", "the directory holding a directory per volume (node: staged from there; controller: removed by DeleteVolume)")
	flag.BoolVar(&cfg.Controller, "controller", true, "serve the controller service")
	flag.BoolVar(&cfg.Attach, "attach", false, "the controller publishes volumes to nodes (PUBLISH_UNPUBLISH_VOLUME, for attachRequired)")
	flag.Parse()
	path, ok := strings.CutPrefix(*endpoint, "unix://")
	if !ok || path == "" {
		return fmt.Errorf("--endpoint (or $CSI_ENDPOINT) must be unix:///PATH, got %q", *endpoint)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove the stale socket %s: %w", path, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", path, err)
	}
	d := driver.NewCSIDriver(cfg.servers())
	if err := d.Start(ln); err != nil {
		return fmt.Errorf("serve on %s: %w", path, err)
	}
	klog.InfoS("CSI mock driver serving", "name", cfg.Name, "endpoint", *endpoint, "node", cfg.NodeID, "controller", cfg.Controller, "attach", cfg.Attach)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	<-ctx.Done()
	d.Stop()
	os.Remove(path)
	return nil
}
