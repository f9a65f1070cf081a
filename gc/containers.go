// Package gc removes what the node no longer needs: dead containers and
// sandboxes, and unused images when the image filesystem fills up. The
// pure plans are runtime.PlanContainerGC and runtime.PlanImageGC; the
// collectors here list, plan and remove, and touch nothing else.
package gc

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

// Containers removes dead containers and sandboxes: runtime.PlanContainerGC
// decides from a fresh listing, Collect removes. Every field but Removed is
// required. The pod workers only ever
// add instances, and the plan keeps each live container's latest instance
// and latest exited one, so a worker restarting a container never loses
// what its plan reads.
type Containers struct {
	Policy runtime.GCPolicy
	// List reads every pod's containers and sandboxes from the runtime.
	List            func(ctx context.Context) ([]runtime.PodStatus, error)
	RemoveContainer func(ctx context.Context, id string) error
	RemoveSandbox   func(ctx context.Context, id string) error
	// IsPodLive tells whether a pod's containers must keep their latest
	// instances (the API has it, or its workers are not done with it).
	IsPodLive func(types.UID) bool
	// Removed, optional, counts each removal by kind ("container" or
	// "sandbox"; nodelet_container_gc_removed_total).
	Removed func(kind string)
	Now     func() time.Time
	Log     *slog.Logger
}

// Collect runs one garbage collection; every removal is tried and the
// errors are joined.
func (g *Containers) Collect(ctx context.Context) error {
	pods, err := g.List(ctx)
	if err != nil {
		return fmt.Errorf("container gc: %w", err)
	}
	var errs []error
	for _, r := range runtime.PlanContainerGC(g.Policy, pods, g.Now(), g.IsPodLive) {
		if err := g.remove(ctx, r); err != nil {
			errs = append(errs, err)
			continue
		}
		if g.Removed != nil {
			g.Removed(string(r.Kind))
		}
		g.Log.Debug("removed dead "+string(r.Kind), "pod", r.Pod, "uid", r.PodUID, "id", r.ID, "container", r.Name, "reason", r.Reason)
	}
	return errors.Join(errs...)
}

func (g *Containers) remove(ctx context.Context, r runtime.Removal) error {
	wrap := func(err error) error {
		return fmt.Errorf("container gc: remove %s %s (%s) of pod %s: %w", r.Kind, r.ID, r.Name, r.Pod, err)
	}
	if r.Kind == runtime.RemoveSandboxKind {
		if err := g.RemoveSandbox(ctx, r.ID); err != nil {
			return wrap(err)
		}
		return nil
	}
	if err := g.RemoveContainer(ctx, r.ID); err != nil {
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
