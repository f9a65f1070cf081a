// Package leader runs work only while this process holds a Lease, so two
// control-plane processes against the same storage never both run the
// controllers or the scheduler.
package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Config describes one election.
type Config struct {
	Client kubernetes.Interface
	// Namespace and Name of the Lease (e.g. kube-system/nodelet-controlplane).
	Namespace, Name string
	// Identity of this process (unique: host name plus a random suffix).
	Identity string
	// Durations as upstream's defaults when zero: 15s lease, 10s renew deadline, 2s retry.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	Log                                       *slog.Logger
}

// ErrLostLease is returned by Run when leadership was lost: the caller
// should exit (as upstream components do) so that nothing runs twice.
var ErrLostLease = errors.New("leader: lost the lease")

// Run campaigns for the lease and runs lead while holding it. It returns
// nil when ctx ends (releasing the lease), lead's error if lead fails, or
// ErrLostLease when the lease is lost while lead runs.
func Run(ctx context.Context, cfg Config, lead func(ctx context.Context) error) error {
	if cfg.LeaseDuration == 0 {
		cfg.LeaseDuration = 15 * time.Second
	}
	if cfg.RenewDeadline == 0 {
		cfg.RenewDeadline = 10 * time.Second
	}
	if cfg.RetryPeriod == 0 {
		cfg.RetryPeriod = 2 * time.Second
	}
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	log = log.With("component", "leader", "lease", cfg.Namespace+"/"+cfg.Name, "identity", cfg.Identity)
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.Name},
		Client:     cfg.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	result := make(chan error, 1)
	started := make(chan struct{})
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   cfg.LeaseDuration,
		RenewDeadline:   cfg.RenewDeadline,
		RetryPeriod:     cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            cfg.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				log.Info("became leader")
				close(started)
				err := lead(ctx)
				if err != nil {
					err = fmt.Errorf("while leading: %w", err)
				}
				result <- err
				cancel()
			},
			OnStoppedLeading: func() { log.Info("stopped leading") },
			OnNewLeader: func(id string) {
				if id != cfg.Identity {
					log.Info("another process leads", "leader", id)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	elector.Run(runCtx)
	select {
	case <-started:
		// The elector cancelled lead's context; wait until lead has stopped
		// so nothing runs on after another process may have taken over.
		if err := <-result; err != nil && ctx.Err() == nil {
			return err
		}
	default:
	}
	if ctx.Err() != nil {
		return nil
	}
	return ErrLostLease
}
