package registry

import (
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

func TestScaleOfWorkloads(t *testing.T) {
	ss := newStatefulSet()
	ss.Spec.Replicas = ptr.To(int32(2))
	ss.Status.Replicas = 1
	rc := newReplicationController()
	rc.Spec.Replicas = ptr.To(int32(2))
	rc.Status.Replicas = 1
	for _, obj := range []runtime.Object{ss, rc} {
		sc, err := ScaleOf(obj)
		if err != nil {
			t.Fatalf("%T: %v", obj, err)
		}
		if sc.Spec.Replicas != 2 || sc.Status.Replicas != 1 || sc.Status.Selector != "app=web" || sc.Name == "" {
			t.Errorf("%T: scale = %+v", obj, sc)
		}
		if err := ApplyScale(obj, &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 5}}); err != nil {
			t.Fatalf("%T: %v", obj, err)
		}
		if sc, _ := ScaleOf(obj); sc.Spec.Replicas != 5 {
			t.Errorf("%T: replicas after ApplyScale = %d", obj, sc.Spec.Replicas)
		}
	}
	if _, err := ScaleOf(newDaemonSet()); err == nil {
		t.Errorf("daemon sets have no scale subresource")
	}
}
