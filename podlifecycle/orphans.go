package podlifecycle

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/podworkers"
	"github.com/nodelet/nodelet/runtime"
)

// Orphans finds what the node holds of pods the API no longer has
// (deleted while the nodelet was down, or whose deletion it missed):
// containers and sandboxes, pod cgroups, volume directories, and the log
// directories of finished pods that were deleted later. Housekeeping
// hands the pods to the workers as Remove updates, which clean them up
// like any deleted pod.
type Orphans struct {
	cfg OrphansConfig
}

// OrphansConfig configures Orphans; every field is required.
type OrphansConfig struct {
	// RuntimePods is what the runtime holds, by pod (the PLEG's cache).
	RuntimePods func() []*runtime.PodStatus
	// CgroupPods and VolumePods list pods with a cgroup or volumes.
	CgroupPods, VolumePods func() ([]types.UID, error)
	// InAPI tells whether the API still has the pod.
	InAPI func(types.UID) bool
	// Lifecycle is the pod workers' latest snapshot (Board.Lifecycle).
	Lifecycle func() podworkers.Lifecycle
	LogRoot   string
	Log       *slog.Logger
}

// NewOrphans returns the orphan finder of cfg.
func NewOrphans(cfg OrphansConfig) *Orphans { return &Orphans{cfg: cfg} }

// Pods returns a placeholder pod (UID, and namespace and name when the
// runtime knows them; no grace period) for each orphan.
func (o *Orphans) Pods() []*corev1.Pod {
	found := map[types.UID]*corev1.Pod{}
	for _, st := range o.cfg.RuntimePods() {
		if st != nil && (len(st.Sandboxes) > 0 || len(st.Containers) > 0) {
			found[st.UID] = orphanPod(st.UID, st.Namespace, st.Name)
		}
	}
	for what, list := range map[string]func() ([]types.UID, error){"cgroups": o.cfg.CgroupPods, "volumes": o.cfg.VolumePods} {
		uids, err := list()
		if err != nil {
			o.cfg.Log.Warn("list pods", "of", what, "err", err)
		}
		for _, uid := range uids {
			if _, ok := found[uid]; !ok {
				found[uid] = orphanPod(uid, "", "")
			}
		}
	}
	var out []*corev1.Pod
	for uid, p := range found {
		if !o.cfg.InAPI(uid) {
			out = append(out, p)
		}
	}
	return out
}

func orphanPod(uid types.UID, ns, name string) *corev1.Pod {
	zero := int64(0)
	p := &corev1.Pod{}
	p.UID, p.Namespace, p.Name = uid, ns, name
	p.Spec.TerminationGracePeriodSeconds = &zero
	return p
}

// RemoveLogs removes the log directories (<ns>_<name>_<uid>) of pods the
// API no longer has and the workers are done with: finished pods keep
// their logs until they are deleted.
func (o *Orphans) RemoveLogs() {
	entries, err := os.ReadDir(o.cfg.LogRoot)
	if err != nil {
		return
	}
	life := o.cfg.Lifecycle()
	for _, e := range entries {
		i := strings.LastIndexByte(e.Name(), '_')
		if !e.IsDir() || i < 0 {
			continue
		}
		uid := types.UID(e.Name()[i+1:])
		if o.cfg.InAPI(uid) || !life.ContentRemovable(uid) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(o.cfg.LogRoot, e.Name())); err != nil {
			o.cfg.Log.Warn("remove logs of a deleted pod", "dir", e.Name(), "err", err)
		}
	}
}
