package scheduler

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/controlplane/scheduler/framework"
	"github.com/nodelet/nodelet/controlplane/scheduler/plugins"
)

func prioPod(name, cpu string, prio int32, app string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{Priority: &prio, Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}},
	}
}

func prioNode(name, cpu string, taints []corev1.Taint, pods ...*corev1.Pod) *framework.NodeInfo {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu),
			corev1.ResourceMemory: resource.MustParse("1Gi"), corev1.ResourcePods: resource.MustParse("110")}}}
	n := framework.NewNodeInfo(node)
	for _, p := range pods {
		p.Spec.NodeName = name
		n.AddPod(framework.NewPodInfo(p))
	}
	return n
}

// withHostname labels a node with its hostname, the topology key of the
// anti-affinity cases.
func withHostname(n *framework.NodeInfo) *framework.NodeInfo {
	node := n.Node.DeepCopy()
	node.Labels = map[string]string{corev1.LabelHostname: node.Name}
	n.SetNode(node)
	return n
}

// antiAffine gives p a required anti-affinity to pods labelled app=app on
// the same host.
func antiAffine(p *corev1.Pod, app string) *corev1.Pod {
	p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}, TopologyKey: corev1.LabelHostname}}}}
	return p
}

func withHostPort(p *corev1.Pod, port int32) *corev1.Pod {
	p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: port, HostPort: port, Protocol: corev1.ProtocolTCP}}
	return p
}

func budget(app string, allowed int32) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: app},
		Spec:   policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed}}
}

func TestSelectPreemption(t *testing.T) {
	never := corev1.PreemptNever
	taint := []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}}
	nominated := prioPod("high", "600m", 100, "high")
	nominated.Status.NominatedNodeName = "n1"
	terminating := prioPod("t", "600m", 1, "low")
	terminating.DeletionTimestamp = &metav1.Time{}
	tests := []struct {
		name        string
		pod         *corev1.Pod
		nodes       []*framework.NodeInfo
		pdbs        []*policyv1.PodDisruptionBudget
		wantNode    string
		wantVictims []string
		wantViolate int
		pending     *Candidate
		anti        bool // some existing pod has required anti-affinity
	}{
		{name: "a host port held by a lower-priority pod",
			pod:      withHostPort(prioPod("high", "100m", 100, "high"), 80),
			nodes:    []*framework.NodeInfo{prioNode("n1", "4", nil, withHostPort(prioPod("a", "100m", 1, "low"), 80), prioPod("b", "100m", 1, "low"))},
			wantNode: "n1", wantVictims: []string{"a"}},
		{name: "a lower-priority pod's anti-affinity",
			pod:      prioPod("high", "100m", 100, "high"),
			nodes:    []*framework.NodeInfo{withHostname(prioNode("n1", "4", nil, antiAffine(prioPod("a", "100m", 1, "low"), "high"), prioPod("b", "100m", 1, "low")))},
			anti:     true,
			wantNode: "n1", wantVictims: []string{"a"}},
		{name: "the preemptor's anti-affinity to lower-priority pods",
			pod:      antiAffine(prioPod("high", "100m", 100, "high"), "low"),
			nodes:    []*framework.NodeInfo{withHostname(prioNode("n1", "4", nil, prioPod("a", "100m", 1, "low"), prioPod("b", "100m", 1, "other")))},
			wantNode: "n1", wantVictims: []string{"a"}},
		{name: "anti-affinity of a pod of equal priority stays",
			pod:   prioPod("high", "100m", 100, "high"),
			nodes: []*framework.NodeInfo{withHostname(prioNode("n1", "4", nil, antiAffine(prioPod("a", "100m", 100, "low"), "high"), prioPod("b", "100m", 1, "low")))},
			anti:  true},
		{name: "lowest priority victim suffices",
			pod:      prioPod("high", "500m", 100, "high"),
			nodes:    []*framework.NodeInfo{prioNode("n1", "1", nil, prioPod("a", "500m", 10, "low"), prioPod("b", "500m", 5, "low"))},
			wantNode: "n1", wantVictims: []string{"b"}},
		{name: "two victims, lowest first",
			pod:      prioPod("high", "900m", 100, "high"),
			nodes:    []*framework.NodeInfo{prioNode("n1", "1", nil, prioPod("a", "500m", 10, "low"), prioPod("b", "500m", 5, "low"))},
			wantNode: "n1", wantVictims: []string{"b", "a"}},
		{name: "equal or higher priority pods stay",
			pod:   prioPod("high", "600m", 100, "high"),
			nodes: []*framework.NodeInfo{prioNode("n1", "1", nil, prioPod("a", "500m", 100, "low"), prioPod("b", "500m", 200, "low"))}},
		{name: "preemptionPolicy Never",
			pod: func() *corev1.Pod {
				p := prioPod("high", "600m", 100, "high")
				p.Spec.PreemptionPolicy = &never
				return p
			}(),
			nodes: []*framework.NodeInfo{prioNode("n1", "1", nil, prioPod("a", "500m", 1, "low"))}},
		{name: "a taint eviction cannot fix",
			pod:   prioPod("high", "600m", 100, "high"),
			nodes: []*framework.NodeInfo{prioNode("n1", "1", taint, prioPod("a", "500m", 1, "low"))}},
		// Among equals the ones listed first are given back first.
		{name: "fewer victims win",
			pod: prioPod("high", "600m", 100, "high"),
			nodes: []*framework.NodeInfo{
				prioNode("n1", "1", nil, prioPod("a", "300m", 1, "low"), prioPod("b", "300m", 1, "low"), prioPod("c", "300m", 1, "low")),
				prioNode("n2", "1", nil, prioPod("d", "700m", 1, "low"))},
			wantNode: "n2", wantVictims: []string{"d"}},
		{name: "lower victim priority wins over fewer victims",
			pod: prioPod("high", "600m", 100, "high"),
			nodes: []*framework.NodeInfo{
				prioNode("n1", "1", nil, prioPod("a", "700m", 50, "low")),
				prioNode("n2", "1", nil, prioPod("b", "300m", 1, "low"), prioPod("c", "300m", 1, "low"), prioPod("d", "300m", 1, "low"))},
			wantNode: "n2", wantVictims: []string{"c", "d"}},
		{name: "a node violating no budget wins",
			pod: prioPod("high", "600m", 100, "high"),
			nodes: []*framework.NodeInfo{
				prioNode("n1", "1", nil, prioPod("a", "700m", 1, "guarded")),
				prioNode("n2", "1", nil, prioPod("b", "300m", 1, "free"), prioPod("c", "300m", 1, "free"), prioPod("d", "300m", 1, "free"))},
			pdbs:     []*policyv1.PodDisruptionBudget{budget("guarded", 0)},
			wantNode: "n2", wantVictims: []string{"c", "d"}},
		{name: "a budget that allows it is no violation",
			pod: prioPod("high", "600m", 100, "high"),
			nodes: []*framework.NodeInfo{
				prioNode("n1", "1", nil, prioPod("a", "700m", 1, "guarded")),
				prioNode("n2", "1", nil, prioPod("b", "300m", 1, "free"), prioPod("c", "300m", 1, "free"), prioPod("d", "300m", 1, "free"))},
			pdbs:     []*policyv1.PodDisruptionBudget{budget("guarded", 1)},
			wantNode: "n1", wantVictims: []string{"a"}},
		{name: "violating only if nothing else",
			pod:      prioPod("high", "600m", 100, "high"),
			nodes:    []*framework.NodeInfo{prioNode("n1", "1", nil, prioPod("a", "700m", 1, "guarded"))},
			pdbs:     []*policyv1.PodDisruptionBudget{budget("guarded", 0)},
			wantNode: "n1", wantVictims: []string{"a"}, wantViolate: 1},
		{name: "earlier preemption's victims still there",
			pod:     prioPod("high", "600m", 100, "high"),
			nodes:   []*framework.NodeInfo{prioNode("n1", "1", nil, prioPod("a", "500m", 1, "low")), prioNode("n2", "1", nil, prioPod("b", "500m", 1, "low"))},
			pending: &Candidate{Node: "n1", Victims: []*corev1.Pod{prioPod("a", "500m", 1, "low")}}},
		{name: "earlier preemption done",
			pod:      prioPod("high", "600m", 100, "high"),
			nodes:    []*framework.NodeInfo{prioNode("n1", "1", nil, prioPod("c", "500m", 1, "low"))},
			pending:  &Candidate{Node: "n1", Victims: []*corev1.Pod{prioPod("a", "500m", 1, "low")}},
			wantNode: "n1", wantVictims: []string{"c"}},
		{name: "nominated and victims still terminating",
			pod:   nominated,
			nodes: []*framework.NodeInfo{prioNode("n1", "1", nil, terminating, prioPod("a", "500m", 1, "low"))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := plugins.PreFilter(framework.NewPodInfo(tt.pod), tt.nodes, tt.anti)
			c := SelectPreemption(st, tt.nodes, tt.pdbs, tt.pending)
			if tt.wantNode == "" {
				if c != nil {
					t.Fatalf("candidate %s with %d victims, want none", c.Node, len(c.Victims))
				}
				return
			}
			if c == nil {
				t.Fatalf("no candidate, want %s", tt.wantNode)
			}
			var names []string
			for _, v := range c.Victims {
				names = append(names, v.Name)
			}
			if c.Node != tt.wantNode || !reflect.DeepEqual(names, tt.wantVictims) || c.PDBViolations != tt.wantViolate {
				t.Fatalf("candidate %s victims %v violations %d, want %s %v %d", c.Node, names, c.PDBViolations, tt.wantNode, tt.wantVictims, tt.wantViolate)
			}
		})
	}
}

func TestAddNominated(t *testing.T) {
	n1 := prioNode("n1", "1", nil, prioPod("a", "200m", 1, "low"))
	n2 := prioNode("n2", "1", nil)
	nodes := []*framework.NodeInfo{n1, n2}
	nom := func(name string, prio int32, node string) Nomination {
		return Nomination{Pod: framework.NewPodInfo(prioPod(name, "500m", prio, "x")), Candidate: &Candidate{Node: node}}
	}
	noms := []Nomination{nom("high", 100, "n1"), nom("mid", 50, "n2")}
	requested := func(ns []*framework.NodeInfo) []int64 {
		return []int64{ns[0].Requested.MilliCPU, ns[1].Requested.MilliCPU}
	}
	for _, tt := range []struct {
		name string
		pod  *corev1.Pod
		want []int64
	}{
		{name: "lower priority sees both", pod: prioPod("low", "100m", 10, "x"), want: []int64{700, 500}},
		{name: "equal priority sees it", pod: prioPod("other", "100m", 50, "x"), want: []int64{700, 500}},
		{name: "higher priority sees only higher", pod: prioPod("other", "100m", 60, "x"), want: []int64{700, 0}},
		{name: "the nominated pod does not see itself", pod: prioPod("high", "500m", 100, "x"), want: []int64{200, 0}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := AddNominated(framework.NewPodInfo(tt.pod), nodes, noms)
			if r := requested(got); !reflect.DeepEqual(r, tt.want) {
				t.Fatalf("requested cpu %v, want %v", r, tt.want)
			}
			if r := requested(nodes); !reflect.DeepEqual(r, []int64{200, 0}) {
				t.Fatalf("the snapshot's nodes changed: %v", r)
			}
		})
	}
}
