package prober

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
)

func TestTCPProbe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	closed := closedPort(t)
	tests := []struct {
		name       string
		addr       string
		want       Result
		wantOutput string
	}{
		{name: "listening", addr: l.Addr().String(), want: Success},
		{name: "closed port", addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(closed)), want: Failure,
			wantOutput: "dial tcp 127.0.0.1:" + strconv.Itoa(closed) + ": connect: connection refused"},
	}
	h := testHandlers()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, out, err := h.tcpProbe(context.Background(), tt.addr, 5*time.Second)
			if err != nil || got != tt.want || out != tt.wantOutput {
				t.Errorf("got %v %q %v, want %v %q", got, out, err, tt.want, tt.wantOutput)
			}
		})
	}
}

func TestGRPCProbe(t *testing.T) {
	hs := health.NewServer()
	hs.SetServingStatus("db", healthpb.HealthCheckResponse_NOT_SERVING)
	hs.SetServingStatus("api", healthpb.HealthCheckResponse_SERVING)
	userAgents := make(chan string, 16)
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		userAgents <- strings.Join(md.Get("user-agent"), ",")
		return handler(ctx, req)
	}))
	healthpb.RegisterHealthServer(srv, hs)
	port := serveGRPC(t, srv)

	bare := grpc.NewServer() // no health service
	barePort := serveGRPC(t, bare)

	tests := []struct {
		name       string
		port       int
		service    string
		want       Result
		wantOutput string
	}{
		{name: "serving", port: port, want: Success, wantOutput: "service healthy"},
		{name: "named service serving", port: port, service: "api", want: Success, wantOutput: "service healthy"},
		{name: "not serving", port: port, service: "db", want: Failure,
			wantOutput: `service unhealthy (responded with "NOT_SERVING")`},
		{name: "unknown service", port: port, service: "nope", want: Failure,
			wantOutput: "error: health rpc probe failed: rpc error: code = NotFound"},
		{name: "no health service", port: barePort, want: Failure,
			wantOutput: "error: this server does not implement the grpc health protocol (grpc.health.v1.Health)"},
		{name: "closed port", port: closedPort(t), want: Failure,
			wantOutput: "error: failed to connect service at \"127.0.0.1:"},
	}
	h := testHandlers()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, out, err := h.grpcProbe(context.Background(), "127.0.0.1", tt.port, tt.service, 5*time.Second)
			if err != nil || got != tt.want || !strings.Contains(out, tt.wantOutput) {
				t.Errorf("got %v %q %v, want %v containing %q", got, out, err, tt.want, tt.wantOutput)
			}
		})
	}
	select {
	case ua := <-userAgents:
		if !strings.HasPrefix(ua, "kube-probe/1.37") {
			t.Errorf("user-agent = %q", ua)
		}
	default:
		t.Error("no health check reached the server")
	}
}

func serveGRPC(t *testing.T, srv *grpc.Server) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return l.Addr().(*net.TCPAddr).Port
}
