package prober

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// DialFunc opens a connection for HTTP, TCP and gRPC probes (the
// signature of net.Dialer.DialContext).
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// defaultDial is upstream's ProbeDialer: SO_LINGER of 1s, so that the
// connections of frequent probes are reset on close rather than left in
// TIME_WAIT.
func defaultDial() DialFunc {
	d := &net.Dialer{
		Control: func(_, _ string, c syscall.RawConn) error {
			// A socket that cannot linger still probes: the error is ignored.
			return c.Control(func(fd uintptr) {
				_ = syscall.SetsockoptLinger(int(fd), syscall.SOL_SOCKET, syscall.SO_LINGER,
					&syscall.Linger{Onoff: 1, Linger: 1})
			})
		},
	}
	return d.DialContext
}

// tcpProbe is upstream's TCP prober: a connection within the timeout is
// a success, anything else a failure with the dial error ("dial tcp
// 10.1.2.3:80: connect: connection refused").
func (h *handlers) tcpProbe(ctx context.Context, addr string, timeout time.Duration) (Result, string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := h.dial(ctx, "tcp", addr)
	if err != nil {
		return Failure, err.Error(), nil
	}
	if err := conn.Close(); err != nil {
		h.log.Debug("closing tcp probe connection", "addr", addr, "err", err)
	}
	return Success, "", nil
}

// grpcProbe is upstream's gRPC prober: grpc.health.v1.Health/Check of
// service over plaintext; SERVING is a success, any other status or error
// a failure with upstream's messages.
func (h *handlers) grpcProbe(ctx context.Context, host string, port int, service string, timeout time.Duration) (Result, string, error) {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUserAgent(h.userAgent),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			return h.dial(ctx, "tcp", a)
		}),
	)
	if err != nil {
		return Failure, fmt.Sprintf("error: failed to connect service at %q: %+v", addr, err), nil
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return Failure, grpcFailure(addr, err, timeout), nil
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return Failure, fmt.Sprintf("service unhealthy (responded with %q)", resp.GetStatus().String()), nil
	}
	return Success, "service healthy", nil
}

// grpcFailure is the output of a failed health RPC.
func grpcFailure(addr string, err error, timeout time.Duration) string {
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Sprintf("error: health rpc probe failed: %+v", err)
	}
	switch st.Code() {
	case codes.Unimplemented:
		return "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): " + st.Message()
	case codes.DeadlineExceeded:
		return fmt.Sprintf("timeout: health rpc did not complete within %v", timeout)
	case codes.Unavailable:
		// Upstream blocks in the dial and reports its error this way.
		return fmt.Sprintf("error: failed to connect service at %q: %s", addr, st.Message())
	default:
		return fmt.Sprintf("error: health rpc probe failed: %+v", err)
	}
}
