package nodelet

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/runtime"
)

// orphans finds what the node holds of pods the API no longer has
// (deleted while the nodelet was down, or whose deletion it missed):
// containers and sandboxes, pod cgroups, volume directories, and the log
// directories of finished pods that were deleted later. Housekeeping
// hands the pods to the workers as Remove updates, which clean them up
// like any deleted pod.
type orphans struct {
	// runtimePods is what the runtime holds, by pod (the PLEG's cache).
	runtimePods func() []*runtime.PodStatus
	// cgroupPods and volumePods list pods with a cgroup or volumes.
	cgroupPods, volumePods func() ([]types.UID, error)
	// inAPI tells whether the API still has the pod.
	inAPI func(types.UID) bool
	// contentRemovable tells whether the workers are done with the pod.
	contentRemovable func(types.UID) bool
	logRoot          string
	log              *slog.Logger
}

// pods returns a placeholder pod (UID, and namespace and name when the
// runtime knows them; no grace period) for each orphan.
func (o *orphans) pods() []*corev1.Pod {
	found := map[types.UID]*corev1.Pod{}
	for _, st := range o.runtimePods() {
		if st != nil && (len(st.Sandboxes) > 0 || len(st.Containers) > 0) {
			found[st.UID] = orphanPod(st.UID, st.Namespace, st.Name)
		}
	}
	for what, list := range map[string]func() ([]types.UID, error){"cgroups": o.cgroupPods, "volumes": o.volumePods} {
		uids, err := list()
		if err != nil {
			o.log.Warn("list pods", "of", what, "err", err)
		}
		for _, uid := range uids {
			if _, ok := found[uid]; !ok {
				found[uid] = orphanPod(uid, "", "")
			}
		}
	}
	var out []*corev1.Pod
	for uid, p := range found {
		if !o.inAPI(uid) {
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

// removeLogs removes the log directories (<ns>_<name>_<uid>) of pods the
// API no longer has and the workers are done with: finished pods keep
// their logs until they are deleted.
func (o *orphans) removeLogs() {
	entries, err := os.ReadDir(o.logRoot)
	if err != nil {
		return
	}
	for _, e := range entries {
		i := strings.LastIndexByte(e.Name(), '_')
		if !e.IsDir() || i < 0 {
			continue
		}
		uid := types.UID(e.Name()[i+1:])
		if o.inAPI(uid) || !o.contentRemovable(uid) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(o.logRoot, e.Name())); err != nil {
			o.log.Warn("remove logs of a deleted pod", "dir", e.Name(), "err", err)
		}
	}
}
