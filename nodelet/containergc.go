package nodelet

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/runtime"
)

// containerGCTicks: the container GC runs every 6th housekeeping tick
// (once a minute, upstream's period).
const containerGCTicks = 6

// containerGC removes dead containers and sandboxes: runtime.PlanContainerGC
// decides from a fresh listing, collect removes. The pod workers only ever
// add instances, and the plan keeps each live container's latest instance
// and latest exited one, so a worker restarting a container never loses
// what its plan reads.
type containerGC struct {
	policy runtime.GCPolicy
	// list reads every pod's containers and sandboxes from the runtime.
	list            func(ctx context.Context) ([]runtime.PodStatus, error)
	removeContainer func(ctx context.Context, id string) error
	removeSandbox   func(ctx context.Context, id string) error
	// isPodLive tells whether a pod's containers must keep their latest
	// instances (the API has it, or its workers are not done with it).
	isPodLive func(types.UID) bool
	// removed, optional, counts each removal by kind ("container" or
	// "sandbox"; nodelet_container_gc_removed_total).
	removed func(kind string)
	now     func() time.Time
	log     *slog.Logger
}

// collect runs one garbage collection; every removal is tried and the
// errors are joined.
func (g *containerGC) collect(ctx context.Context) error {
	pods, err := g.list(ctx)
	if err != nil {
		return fmt.Errorf("container gc: %w", err)
	}
	var errs []error
	for _, r := range runtime.PlanContainerGC(g.policy, pods, g.now(), g.isPodLive) {
		if err := g.remove(ctx, r); err != nil {
			errs = append(errs, err)
			continue
		}
		if g.removed != nil {
			g.removed(string(r.Kind))
		}
		g.log.Debug("removed dead "+string(r.Kind), "pod", r.Pod, "uid", r.PodUID, "id", r.ID, "container", r.Name, "reason", r.Reason)
	}
	return errors.Join(errs...)
}

func (g *containerGC) remove(ctx context.Context, r runtime.Removal) error {
	wrap := func(err error) error {
		return fmt.Errorf("container gc: remove %s %s (%s) of pod %s: %w", r.Kind, r.ID, r.Name, r.Pod, err)
	}
	if r.Kind == runtime.RemoveSandboxKind {
		if err := g.removeSandbox(ctx, r.ID); err != nil {
			return wrap(err)
		}
		return nil
	}
	if err := g.removeContainer(ctx, r.ID); err != nil {
		return wrap(err)
	}
	if err := removeLogFiles(r.LogPath); err != nil {
		return wrap(err)
	}
	return nil
}

// removeLogFiles removes a container's log file and its rotated siblings
// (path.*). A missing file is success.
func removeLogFiles(path string) error {
	if path == "" {
		return nil
	}
	rotated, err := filepath.Glob(path + ".*")
	if err != nil {
		return fmt.Errorf("log files of %s: %w", path, err)
	}
	var errs []error
	for _, p := range append(rotated, path) {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove log: %w", err))
		}
	}
	return errors.Join(errs...)
}

// containerGC builds the agent's collector on the runtime, the informer's
// pods and the workers.
func (a *Agent) containerGC(w *wired) *containerGC {
	return &containerGC{
		policy: runtime.GCPolicy{
			MinAge:             a.cfg.MinimumContainerTTLDuration,
			MaxPerPodContainer: a.cfg.MaximumDeadContainersPerContainer,
			MaxContainers:      a.cfg.MaximumDeadContainers,
		},
		list: w.rt.PodStatuses, removeContainer: w.rt.RemoveContainer, removeSandbox: w.rt.RemoveSandbox,
		isPodLive: func(uid types.UID) bool {
			return podByUID(w, uid) != nil || !w.board.Lifecycle().ContentRemovable(uid)
		},
		removed: a.metrics.ContainerGCRemoved,
		now:     time.Now, log: a.log.With("component", "containergc"),
	}
}
