package registry

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// TestStatusSplit checks, for every resource with a status subresource, that
// the main resource cannot write status and the status subresource cannot
// write spec or metadata (except the resourceVersion it sends).
func TestStatusSplit(t *testing.T) {
	tests := []struct {
		resource string
		// old returns a stored object; change returns a copy with both spec
		// and status changed; specOf and statusOf extract the parts.
		old      func() runtime.Object
		change   func(runtime.Object) runtime.Object
		specOf   func(runtime.Object) interface{}
		statusOf func(runtime.Object) interface{}
	}{
		{
			resource: "pods",
			old: func() runtime.Object {
				p := newPod(ctr("app", "nginx"))
				p.Status.Phase = corev1.PodRunning
				return p
			},
			change: func(o runtime.Object) runtime.Object {
				p := o.DeepCopyObject().(*corev1.Pod)
				p.Spec.Containers[0].Image = "nginx:2"
				p.Status.Phase = corev1.PodSucceeded
				return p
			},
			specOf:   func(o runtime.Object) interface{} { return o.(*corev1.Pod).Spec.Containers[0].Image },
			statusOf: func(o runtime.Object) interface{} { return o.(*corev1.Pod).Status.Phase },
		},
		{
			resource: "deployments",
			old: func() runtime.Object {
				d := newDeployment()
				d.Status.Replicas = 1
				return d
			},
			change: func(o runtime.Object) runtime.Object {
				d := o.DeepCopyObject().(*appsv1.Deployment)
				d.Spec.Replicas = ptr.To(int32(5))
				d.Status.Replicas = 3
				return d
			},
			specOf:   func(o runtime.Object) interface{} { return o.(*appsv1.Deployment).Spec.Replicas },
			statusOf: func(o runtime.Object) interface{} { return o.(*appsv1.Deployment).Status.Replicas },
		},
		{
			resource: "nodes",
			old: func() runtime.Object {
				return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Phase: corev1.NodeRunning}}
			},
			change: func(o runtime.Object) runtime.Object {
				n := o.DeepCopyObject().(*corev1.Node)
				n.Spec.Unschedulable = true
				n.Status.Phase = corev1.NodeTerminated
				return n
			},
			specOf:   func(o runtime.Object) interface{} { return o.(*corev1.Node).Spec.Unschedulable },
			statusOf: func(o runtime.Object) interface{} { return o.(*corev1.Node).Status.Phase },
		},
	}
	for _, tt := range tests {
		t.Run(tt.resource, func(t *testing.T) {
			r := resourceByName(t, tt.resource)
			old := tt.old()
			oldSpec, oldStatus := tt.specOf(old), tt.statusOf(old)

			obj := tt.change(old)
			r.PrepareForUpdate(obj, old)
			if tt.statusOf(obj) != oldStatus {
				t.Errorf("main update changed status to %v", tt.statusOf(obj))
			}
			if tt.specOf(obj) == oldSpec {
				t.Errorf("main update lost the spec change")
			}

			obj = tt.change(old)
			m := obj.(metav1.Object)
			m.SetLabels(map[string]string{"sneaky": "yes"})
			m.SetResourceVersion("42")
			r.PrepareForStatusUpdate(obj, old)
			if tt.statusOf(obj) == oldStatus {
				t.Errorf("status update lost the status change")
			}
			if tt.specOf(obj) != oldSpec && !equalPtr(tt.specOf(obj), oldSpec) {
				t.Errorf("status update changed spec to %v", tt.specOf(obj))
			}
			if m.GetLabels()["sneaky"] != "" || m.GetResourceVersion() != "42" {
				t.Errorf("status update metadata: labels %v, resourceVersion %q", m.GetLabels(), m.GetResourceVersion())
			}
		})
	}
}

// TestDeploymentStatusUpdateKeepsAnnotations: as upstream's status
// strategy, a Deployment's status update may change its annotations (the
// Deployment controller records its revision so) but not its labels.
func TestDeploymentStatusUpdateKeepsAnnotations(t *testing.T) {
	r := resourceByName(t, "deployments")
	old := newDeployment()
	d := old.DeepCopy()
	d.Annotations = map[string]string{"deployment.kubernetes.io/revision": "2"}
	d.Labels = map[string]string{"sneaky": "yes"}
	r.PrepareForStatusUpdate(d, old)
	if d.Annotations["deployment.kubernetes.io/revision"] != "2" || d.Labels["sneaky"] != "" {
		t.Errorf("status update: annotations %v labels %v", d.Annotations, d.Labels)
	}
}

func equalPtr(a, b interface{}) bool {
	pa, ok1 := a.(*int32)
	pb, ok2 := b.(*int32)
	return ok1 && ok2 && (pa == nil) == (pb == nil) && (pa == nil || *pa == *pb)
}

func TestPrepareForCreateResetsStatus(t *testing.T) {
	pods := resourceByName(t, "pods")
	pod := newPod(ctr("app", "nginx"))
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1"}
	pods.Default(pod)
	pods.PrepareForCreate(pod)
	if pod.Status.Phase != corev1.PodPending || pod.Status.PodIP != "" || pod.Status.QOSClass != corev1.PodQOSBestEffort {
		t.Errorf("pod status after create = %+v", pod.Status)
	}

	svcs := resourceByName(t, "services")
	svc := &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.1"}}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "1.2.3.4"}}
	svcs.PrepareForCreate(svc)
	if len(svc.Status.LoadBalancer.Ingress) != 0 || len(svc.Spec.ClusterIPs) != 1 {
		t.Errorf("service after create = %+v", svc)
	}

	nodes := resourceByName(t, "nodes")
	if nodes.PrepareForCreate != nil {
		t.Errorf("nodes must keep the status they register with")
	}
}

func TestSpecChanged(t *testing.T) {
	r := resourceByName(t, "replicasets")
	old := &appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(1))}}
	same := old.DeepCopy()
	same.Labels = map[string]string{"a": "b"}
	same.Status.Replicas = 4
	if r.SpecChanged(same, old) {
		t.Errorf("labels and status changes are not spec changes")
	}
	scaled := old.DeepCopy()
	scaled.Spec.Replicas = ptr.To(int32(2))
	if !r.SpecChanged(scaled, old) {
		t.Errorf("a replicas change is a spec change")
	}
}
