package registry

import (
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodStatusColumn(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	always := corev1.ContainerRestartPolicyAlways
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	waiting := func(reason string) corev1.ContainerState {
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}
	}
	terminated := func(reason string, code int32) corev1.ContainerState {
		return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: reason, ExitCode: code}}
	}
	tests := []struct {
		name      string
		pod       func(*corev1.Pod)
		ready     string
		status    string
		restarts  string
		deleting  bool
		initCount int
	}{
		{"pending", func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }, "0/1", "Pending", "0", false, 0},
		{"running", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodRunning
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Ready: true, State: running}}
		}, "1/1", "Running", "0", false, 0},
		{"creating", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodPending
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", State: waiting("ContainerCreating")}}
		}, "0/1", "ContainerCreating", "0", false, 0},
		{"crash loop with restarts", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodRunning
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", State: waiting("CrashLoopBackOff"), RestartCount: 4,
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.NewTime(now.Add(-5 * time.Minute))}}}}
		}, "0/1", "CrashLoopBackOff", "4 (5m ago)", false, 0},
		{"completed", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodSucceeded
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", State: terminated("Completed", 0)}}
		}, "0/1", "Completed", "0", false, 0},
		{"exit code without reason", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodFailed
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", State: terminated("", 3)}}
		}, "0/1", "ExitCode:3", "0", false, 0},
		{"init progress", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodPending
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{
				{Name: "init0", State: terminated("Completed", 0)},
				{Name: "init1", State: running},
			}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", State: waiting("PodInitializing")}}
		}, "0/1", "Init:1/2", "0", false, 2},
		{"init error", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodPending
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "init0", State: terminated("Error", 1), RestartCount: 2}}
		}, "0/1", "Init:Error", "2", false, 2},
		{"init crash loop", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodPending
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "init0", State: waiting("CrashLoopBackOff")}}
		}, "0/1", "Init:CrashLoopBackOff", "0", false, 2},
		{"pod initializing", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodPending
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "init0", State: terminated("Completed", 0)}, {Name: "init1", State: terminated("Completed", 0)}}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", State: waiting("PodInitializing")}}
		}, "0/1", "PodInitializing", "0", false, 2},
		{"sidecar counts as container", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "proxy", RestartPolicy: &always}}
			started := true
			p.Status.Phase = corev1.PodRunning
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "proxy", Started: &started, Ready: true, State: running}}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Ready: true, State: running}}
		}, "2/2", "Running", "0", false, 0},
		{"terminating", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodRunning
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Ready: true, State: running}}
		}, "1/1", "Terminating", "0", true, 0},
		{"node lost", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodRunning
			p.Status.Reason = nodeUnreachablePodReason
		}, "0/1", "NodeLost", "0", false, 0},
		{"node lost and deleted", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodRunning
			p.Status.Reason = nodeUnreachablePodReason
		}, "0/1", "Unknown", "0", true, 0},
		{"scheduling gated", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodPending
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Reason: corev1.PodReasonSchedulingGated}}
		}, "0/1", "SchedulingGated", "0", false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := newPod(ctr("app", "nginx"))
			pod.CreationTimestamp = metav1.NewTime(now.Add(-90 * time.Second))
			for i := 0; i < tt.initCount; i++ {
				pod.Spec.InitContainers = append(pod.Spec.InitContainers, ctr("init"+string(rune('0'+i)), "busybox"))
			}
			if tt.deleting {
				pod.DeletionTimestamp = &metav1.Time{Time: now}
			}
			tt.pod(pod)
			cells := podRow(pod, now)
			got := []interface{}{cells[1], cells[2], cells[3], cells[4]}
			want := []interface{}{tt.ready, tt.status, tt.restarts, "90s"}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("cells = %q, want %q", got, want)
			}
		})
	}
}

func TestRowsMatchColumns(t *testing.T) {
	now := time.Now()
	for _, r := range All() {
		if r.Review {
			continue // never listed or got: nothing to print
		}
		if r.Row == nil {
			t.Errorf("%s: no Row", r.Name)
			continue
		}
		cells := r.Row(r.New(), now)
		if len(cells) != len(r.Columns) {
			t.Errorf("%s: %d cells for %d columns", r.Name, len(cells), len(r.Columns))
		}
		names := 0
		for i, c := range r.Columns {
			// The first column is the name; upstream's printers also
			// mark VolumeAttachments' Attacher as one.
			if c.Format == "name" && (i == 0 || r.Name != "volumeattachments") {
				names++
			}
			if c.Description == "" {
				t.Errorf("%s: column %q has no description", r.Name, c.Name)
			}
		}
		if names != 1 {
			t.Errorf("%s: %d name columns", r.Name, names)
		}
	}
}

func TestOtherRows(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	created := metav1.NewTime(now.Add(-49 * time.Hour))
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", CreationTimestamp: created, Labels: map[string]string{
			"node-role.kubernetes.io/worker": "", "node-role.kubernetes.io/control-plane": ""}},
		Spec: corev1.NodeSpec{Unschedulable: true},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.5"}},
			NodeInfo:   corev1.NodeSystemInfo{KubeletVersion: "v1.32.3"},
		},
	}
	want := []interface{}{"n1", "Ready,SchedulingDisabled", "control-plane,worker", "2d1h", "v1.32.3",
		"10.0.0.5", "<none>", "<unknown>", "<unknown>", "<unknown>"}
	if got := nodeRow(node, now); !reflect.DeepEqual(got, want) {
		t.Errorf("node row = %q\nwant %q", got, want)
	}

	replicas := int32(3)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", CreationTimestamp: created},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{ctr("a", "nginx"), ctr("b", "redis")}}}},
		Status: appsv1.DeploymentStatus{ReadyReplicas: 2, UpdatedReplicas: 3, AvailableReplicas: 2},
	}
	wantD := []interface{}{"web", "2/3", int64(3), int64(2), "2d1h", "a,b", "nginx,redis", "app=web"}
	if got := deploymentRow(d, now); !reflect.DeepEqual(got, wantD) {
		t.Errorf("deployment row = %v\nwant %v", got, wantD)
	}

	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", CreationTimestamp: created},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIPs: []string{"10.96.0.10"},
			Ports: []corev1.ServicePort{{Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP}, {Port: 53, Protocol: corev1.ProtocolUDP}}},
	}
	wantS := []interface{}{"web", "NodePort", "10.96.0.10", "<none>", "80:30080/TCP,53/UDP", "2d1h", "<none>"}
	if got := serviceRow(svc, now); !reflect.DeepEqual(got, wantS) {
		t.Errorf("service row = %v\nwant %v", got, wantS)
	}

	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Subsets: []corev1.EndpointSubset{{
		Addresses: []corev1.EndpointAddress{{IP: "10.1.0.1"}, {IP: "10.1.0.2"}, {IP: "10.1.0.3"}, {IP: "10.1.0.4"}},
		Ports:     []corev1.EndpointPort{{Port: 8080}},
	}}}
	if got := endpointsRow(ep, now)[1]; got != "10.1.0.1:8080,10.1.0.2:8080,10.1.0.3:8080 + 1 more..." {
		t.Errorf("endpoints cell = %q", got)
	}
}
