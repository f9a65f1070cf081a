package volumes

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// podStates is what this process has set up: per pod, the pod as last
// set up and its volumes. It starts empty after a restart and fills at
// each pod's next sync (SetupPod runs at every sync).
type podStates struct {
	mu   sync.Mutex
	pods map[types.UID]*podState
}

type podState struct {
	pod     *corev1.Pod
	volumes map[string]*volumeState
}

type volumeState struct {
	mount Mount
	owned bool // got the pod's fsGroup
}

func (s *podStates) setUp(pod *corev1.Pod, name string, mnt Mount) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pods == nil {
		s.pods = map[types.UID]*podState{}
	}
	ps := s.pods[pod.UID]
	if ps == nil {
		ps = &podState{volumes: map[string]*volumeState{}}
		s.pods[pod.UID] = ps
	}
	ps.pod = pod
	vs := ps.volumes[name]
	if vs == nil {
		vs = &volumeState{}
		ps.volumes[name] = vs
	}
	vs.mount = mnt
}

func (s *podStates) owned(uid types.UID, name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := s.pods[uid]
	return ps != nil && ps.volumes[name] != nil && ps.volumes[name].owned
}

// setOwned marks a volume that setUp recorded as given its fsGroup.
func (s *podStates) setOwned(uid types.UID, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ps := s.pods[uid]; ps != nil && ps.volumes[name] != nil {
		ps.volumes[name].owned = true
	}
}

func (s *podStates) forget(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pods, uid)
}

// podVolume is one set-up volume of a pod, as snapshot returns it.
type podVolume struct {
	pod   *corev1.Pod
	vol   *corev1.Volume
	mount Mount
}

// snapshot returns every set-up volume whose pod still names it.
func (s *podStates) snapshot() []podVolume {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []podVolume
	for _, ps := range s.pods {
		for i := range ps.pod.Spec.Volumes {
			vol := &ps.pod.Spec.Volumes[i]
			if vs := ps.volumes[vol.Name]; vs != nil {
				out = append(out, podVolume{pod: ps.pod, vol: vol, mount: vs.mount})
			}
		}
	}
	return out
}
