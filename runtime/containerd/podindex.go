package containerd

import (
	"sync"

	"github.com/containerd/containerd/v2/core/containers"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/runtime"
)

// podIndex knows which containers (sandboxes included) belong to which
// pod, so that PodStatus reads a pod's few containers by ID instead of
// asking containerd for a filtered list: containerd answers a filter by
// decoding every container record of the namespace (its labels and its
// whole OCI spec), which made each pod sync cost O(containers) and a burst
// of pods O(pods²) of containerd's CPU (a third of it in a 100-pod burst).
//
// The contract: every full list (PodStatuses, the PLEG's relist) replaces
// the index, but for what was created since the list began (a list taken
// before a create must not hide it); this Runtime's creates add to it at
// once and its removals take from it, so PodStatus sees what this process
// just made. A
// container made behind the nodelet's back (only the nodelet writes its
// namespace: the instance lock) shows at the next full list; one removed
// behind its back is dropped when its read finds it gone. Until the first
// full list the index is unprimed and PodStatus lists to prime it.
type podIndex struct {
	mu     sync.Mutex
	primed bool
	pods   map[types.UID]map[string]bool
	owner  map[string]types.UID // container ID -> pod
	// gen counts adds; added is the gen of each container's add.
	gen   uint64
	added map[string]uint64
}

func newPodIndex() *podIndex {
	return &podIndex{pods: map[types.UID]map[string]bool{}, owner: map[string]types.UID{}, added: map[string]uint64{}}
}

// begin is called before a full list; its result goes to replace.
func (x *podIndex) begin() uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.gen
}

// replace makes the index what a full list of the namespace's pod
// containers says, keeping what was added after begin returned since.
func (x *podIndex) replace(list []containers.Container, since uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	keep := map[string]types.UID{}
	for id, uid := range x.owner {
		if x.added[id] > since {
			keep[id] = uid
		}
	}
	x.pods, x.owner, x.added, x.primed = map[types.UID]map[string]bool{}, map[string]types.UID{}, map[string]uint64{}, true
	for _, ct := range list {
		if uid := types.UID(ct.Labels[runtime.LabelPodUID]); uid != "" {
			x.addLocked(uid, ct.ID, 0)
		}
	}
	for id, uid := range keep {
		x.addLocked(uid, id, x.gen)
	}
}

// add records a container this Runtime just created.
func (x *podIndex) add(uid types.UID, id string) {
	if uid == "" {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.gen++
	x.addLocked(uid, id, x.gen)
}

func (x *podIndex) addLocked(uid types.UID, id string, gen uint64) {
	if x.pods[uid] == nil {
		x.pods[uid] = map[string]bool{}
	}
	x.pods[uid][id] = true
	x.owner[id] = uid
	x.added[id] = gen
}

// remove forgets a container (removed, or found gone).
func (x *podIndex) remove(id string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	uid, ok := x.owner[id]
	if !ok {
		return
	}
	delete(x.owner, id)
	delete(x.added, id)
	delete(x.pods[uid], id)
	if len(x.pods[uid]) == 0 {
		delete(x.pods, uid)
	}
}

// containers returns the pod's container IDs, and false while unprimed.
func (x *podIndex) containers(uid types.UID) ([]string, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.primed {
		return nil, false
	}
	ids := make([]string, 0, len(x.pods[uid]))
	for id := range x.pods[uid] {
		ids = append(ids, id)
	}
	return ids, true
}
