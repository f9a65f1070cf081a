package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	goruntime "runtime"
	"sync"
	"time"

	"github.com/vishvananda/netns"
)

// ForwardConfig is the forwarder's: it listens on the host and carries
// each connection to an address inside a network namespace.
type ForwardConfig struct {
	Listen string // host address, e.g. 127.0.0.1:6443
	NetNS  string // path of the namespace, e.g. /run/netns/nlab-lab
	To     string // address inside the namespace, e.g. 10.240.0.1:6443
	Log    io.Writer
}

// Forward serves until ctx ends. The lab's addresses exist only inside its
// namespace, so this is how kubectl on the host reaches the API server.
func Forward(ctx context.Context, cfg ForwardConfig) error {
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("forward: listen on %s: %w", cfg.Listen, err)
	}
	var wg sync.WaitGroup
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	for {
		in, err := ln.Accept()
		if err != nil {
			wg.Wait()
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("forward: accept on %s: %w", cfg.Listen, err)
		}
		wg.Go(func() {
			if err := forwardConn(ctx, in, cfg); err != nil {
				fmt.Fprintf(cfg.Log, "forward: %v\n", err)
			}
		})
	}
}

// forwardConn dials the target in the namespace and copies both ways until
// both sides have closed (or ctx ends).
func forwardConn(ctx context.Context, in net.Conn, cfg ForwardConfig) error {
	defer in.Close()
	out, err := dialInNetns(cfg.NetNS, cfg.To, 5*time.Second)
	if err != nil {
		return err
	}
	defer out.Close()
	stop := context.AfterFunc(ctx, func() { in.Close(); out.Close() })
	defer stop()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite() // pass the end of the stream on
		}
		done <- struct{}{}
	}
	go pipe(out, in)
	go pipe(in, out)
	<-done
	<-done
	return nil
}

// dialInNetns opens a TCP connection from inside the namespace at nsPath.
// A socket belongs to the namespace of the thread that created it, for
// life: so the goroutine locks its thread, enters the namespace, dials and
// goes back. The namespace is opened per connection, so the forwarder
// never holds it alive after the lab deletes it.
func dialInNetns(nsPath, addr string, timeout time.Duration) (net.Conn, error) {
	goruntime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		goruntime.UnlockOSThread()
		return nil, fmt.Errorf("dial %s in %s: own namespace: %w", addr, nsPath, err)
	}
	defer orig.Close()
	target, err := netns.GetFromPath(nsPath)
	if err != nil {
		goruntime.UnlockOSThread()
		return nil, fmt.Errorf("dial %s in %s: open namespace: %w", addr, nsPath, err)
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		goruntime.UnlockOSThread()
		return nil, fmt.Errorf("dial %s in %s: enter namespace: %w", addr, nsPath, err)
	}
	conn, dialErr := net.DialTimeout("tcp", addr, timeout)
	if err := netns.Set(orig); err != nil {
		// The thread stays in the lab namespace: leave it locked, so Go
		// ends it with this goroutine instead of reusing it.
		if conn != nil {
			conn.Close()
		}
		return nil, errors.Join(dialErr, fmt.Errorf("dial %s in %s: restore namespace: %w", addr, nsPath, err))
	}
	goruntime.UnlockOSThread()
	if dialErr != nil {
		return nil, fmt.Errorf("dial %s in %s: %w", addr, nsPath, dialErr)
	}
	return conn, nil
}
