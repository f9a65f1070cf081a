package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/nodelet/nodelet/test/testkit"
)

type fakeDriver struct {
	csi.UnimplementedIdentityServer
}

func (fakeDriver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: "test.csi.nodelet.io"}, nil
}

// The registrar asks the driver its name, answers the node's GetInfo as
// node-driver-registrar does, and ends with an error when the node
// reports a failed registration, removing its socket.
func TestRegistrar(t *testing.T) {
	dir := t.TempDir()
	driverSock := filepath.Join(dir, "csi.sock")
	ln, err := net.Listen("unix", driverSock)
	if err != nil {
		t.Fatal(err)
	}
	drv := grpc.NewServer()
	csi.RegisterIdentityServer(drv, fakeDriver{})
	go drv.Serve(ln)
	defer drv.Stop()

	regDir := filepath.Join(dir, "plugins_registry")
	if err := os.Mkdir(regDir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, config{CSIAddress: driverSock, KubeletRegistrationPath: "/var/lib/nodelet/plugins/test.csi.nodelet.io/csi.sock",
			PluginRegistrationPath: regDir})
	}()
	regSock := filepath.Join(regDir, "test.csi.nodelet.io-reg.sock")
	// The socket file exists from bind(), before listen(): wait until it
	// accepts.
	testkit.Eventually(t, 10*time.Second, "the registration socket accepting", func() bool {
		c, err := net.Dial("unix", regSock)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
	conn, err := grpc.NewClient("unix://"+regSock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := registerapi.NewRegistrationClient(conn)
	info, err := client.GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		t.Fatalf("GetInfo: %v", err)
	}
	if info.Type != registerapi.CSIPlugin || info.Name != "test.csi.nodelet.io" ||
		info.Endpoint != "/var/lib/nodelet/plugins/test.csi.nodelet.io/csi.sock" || strings.Join(info.SupportedVersions, ",") != "1.0.0" {
		t.Errorf("GetInfo = %+v", info)
	}
	if _, err := client.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Fatalf("NotifyRegistrationStatus(registered): %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("the registrar ended after a successful registration: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if _, err := client.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: false, Error: "no such version"}); err != nil {
		t.Fatalf("NotifyRegistrationStatus(failed): %v", err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "no such version") {
			t.Errorf("run after a failed registration = %v, want its error", err)
		}
	case <-ctx.Done():
		t.Fatal("the registrar did not end after a failed registration")
	}
	if _, err := os.Stat(regSock); !os.IsNotExist(err) {
		t.Errorf("the registration socket is left: %v", err)
	}
}

func TestRegistrarNeedsTheEndpoint(t *testing.T) {
	if err := run(context.Background(), config{DriverName: "x"}); err == nil {
		t.Fatal("run without --kubelet-registration-path succeeded")
	}
}
