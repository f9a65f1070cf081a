package nodelet

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/pleg"
	"github.com/nodelet/nodelet/runtime/containerd"
)

func runtimeVersion(ctx context.Context, rt *containerd.Runtime) string {
	v, err := rt.Version(ctx)
	if err != nil {
		return "containerd://unknown"
	}
	return "containerd://" + v
}

// readiness is the node's Ready condition: PLEG healthy and a CNI config.
func readiness(p *pleg.PLEG, net interface{ Ready() error }) error {
	if ok, err := p.Healthy(); !ok {
		return fmt.Errorf("PLEG is not healthy: %w", err)
	}
	if err := net.Ready(); err != nil {
		return fmt.Errorf("network not ready: %w", err)
	}
	return nil
}

// notifySystemd is the conversation with systemd (sdnotify.Notifier.Run):
// READY=1 once systemdReady passes, then watchdog pings while
// loopsHealthy does, STOPPING=1 when the agent stops.
func (a *Agent) notifySystemd(started <-chan struct{}, w *wired) func(context.Context) error {
	ready, healthy := a.systemdReady(started, w.rt), loopsHealthy(w.pleg, w.rt)
	return func(ctx context.Context) error {
		a.cfg.Notifier.Run(ctx, ready, healthy, time.Second)
		return nil
	}
}

// systemdReady is when the nodelet tells systemd it is ready (READY=1):
// start-up is through (pod CIDR, CNI config, informers synced), the Node
// object exists and containerd answers.
func (a *Agent) systemdReady(started <-chan struct{}, rt *containerd.Runtime) func(context.Context) error {
	return func(ctx context.Context) error {
		select {
		case <-started:
		default:
			return errors.New("starting: waiting for the node's pod CIDR, the CNI config and the pod informer")
		}
		if _, err := a.client.CoreV1().Nodes().Get(ctx, a.cfg.NodeName, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("get node %s: %w", a.cfg.NodeName, err)
		}
		return containerdAnswers(ctx, rt)
	}
}

// loopsHealthy feeds systemd's watchdog and /healthz: the PLEG relists (a
// stuck one means the nodelet no longer sees its containers) and
// containerd answers.
func loopsHealthy(p *pleg.PLEG, rt *containerd.Runtime) func(context.Context) error {
	return func(ctx context.Context) error {
		if ok, err := p.Healthy(); !ok {
			return fmt.Errorf("PLEG is not healthy: %w", err)
		}
		return containerdAnswers(ctx, rt)
	}
}

func containerdAnswers(ctx context.Context, rt *containerd.Runtime) error {
	if _, err := rt.Version(ctx); err != nil {
		return fmt.Errorf("containerd version: %w", err)
	}
	return nil
}
