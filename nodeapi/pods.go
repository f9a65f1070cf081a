package nodeapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nodelet/nodelet/runtime"
)

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// writeStatus answers err as a metav1.Status, as the API server does.
func writeStatus(w http.ResponseWriter, err error) {
	st := apierrors.NewInternalError(err).ErrStatus
	if s, ok := err.(apierrors.APIStatus); ok {
		st = s.Status()
	}
	st.Kind, st.APIVersion = "Status", "v1"
	if st.Code == 0 {
		st.Code = http.StatusInternalServerError
	}
	writeJSON(w, int(st.Code), st)
}

func nodeResource() schema.GroupResource {
	return schema.GroupResource{Resource: "nodes/proxy"}
}

var podsResource = schema.GroupResource{Resource: "pods"}

// servePods lists the pods bound to this node, as upstream's /pods.
func (s *Server) servePods(w http.ResponseWriter, r *http.Request) {
	list := &corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
	for _, p := range s.cfg.Pods() {
		list.Items = append(list.Items, *p)
	}
	writeJSON(w, http.StatusOK, list)
}

// podTarget is a request's pod and container with its runtime state.
type podTarget struct {
	pod       *corev1.Pod
	container string
	status    *runtime.PodStatus
}

// lookup finds the pod and container a request names: 404 for a pod this
// node does not run or a container the pod does not have.
func (s *Server) lookup(ctx context.Context, r *http.Request, withContainer bool) (*podTarget, error) {
	ns, name := r.PathValue("namespace"), r.PathValue("pod")
	var pod *corev1.Pod
	for _, p := range s.cfg.Pods() {
		if p.Namespace == ns && p.Name == name {
			pod = p
			break
		}
	}
	if pod == nil {
		return nil, apierrors.NewNotFound(podsResource, name)
	}
	t := &podTarget{pod: pod}
	if withContainer {
		t.container = r.PathValue("container")
		if !hasContainer(pod, t.container) {
			return nil, apierrors.NewNotFound(podsResource, fmt.Sprintf("%s/%s (container %q)", ns, name, t.container))
		}
	}
	st, err := s.cfg.Runtime.PodStatus(ctx, pod.UID)
	if err != nil {
		return nil, fmt.Errorf("runtime state of pod %s/%s: %w", ns, name, err)
	}
	t.status = st
	return t, nil
}

func hasContainer(pod *corev1.Pod, name string) bool {
	for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers, runtime.EphemeralContainers(pod)} {
		for _, c := range list {
			if c.Name == name {
				return true
			}
		}
	}
	return false
}

// running returns the running instance of the target's container, or a
// 400 saying why there is none.
func (t *podTarget) running() (*runtime.ContainerStatus, error) {
	c := t.status.LatestContainer(t.container)
	if c == nil {
		if st := t.apiStatus(); st != nil && st.State.Terminated != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("container %q in pod %q is not running (terminated)", t.container, t.pod.Name))
		}
		return nil, apierrors.NewBadRequest(fmt.Sprintf("container %q in pod %q is waiting to start", t.container, t.pod.Name))
	}
	if c.State != runtime.StateRunning {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("container %q in pod %q is not running (%s)", t.container, t.pod.Name, c.State))
	}
	return c, nil
}

// spec is the container's spec (nil if the pod has none of that name).
func (t *podTarget) spec() *corev1.Container {
	for _, list := range [][]corev1.Container{t.pod.Spec.Containers, t.pod.Spec.InitContainers, runtime.EphemeralContainers(t.pod)} {
		for i := range list {
			if list[i].Name == t.container {
				return &list[i]
			}
		}
	}
	return nil
}

// apiStatus is the container's status as the API has it (nil if none).
func (t *podTarget) apiStatus() *corev1.ContainerStatus {
	for _, list := range [][]corev1.ContainerStatus{t.pod.Status.ContainerStatuses, t.pod.Status.InitContainerStatuses, t.pod.Status.EphemeralContainerStatuses} {
		for i := range list {
			if list[i].Name == t.container {
				return &list[i]
			}
		}
	}
	return nil
}

// instances returns the container's newest instance and the one before
// it (either may be nil), newest first as the runtime lists them.
func (t *podTarget) instances() (latest, previous *runtime.ContainerStatus) {
	for i := range t.status.Containers {
		c := &t.status.Containers[i]
		if c.Name != t.container {
			continue
		}
		if latest == nil {
			latest = c
		} else {
			return latest, c
		}
	}
	return latest, nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
