package plugins

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/controlplane/scheduler/framework"
)

func node(name string, labels map[string]string, cpu, mem string, pods int64) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem),
			corev1.ResourceEphemeralStorage: resource.MustParse("10Gi"),
			corev1.ResourcePods:             *resource.NewQuantity(pods, resource.DecimalSI),
		}},
	}
}

func pod(name string, labels map[string]string, cpu, mem string) *corev1.Pod {
	rl := corev1.ResourceList{}
	if cpu != "" {
		rl[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		rl[corev1.ResourceMemory] = resource.MustParse(mem)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: rl}}}},
	}
}

func ni(n *corev1.Node, pods ...*corev1.Pod) *framework.NodeInfo {
	var infos []*framework.PodInfo
	for _, p := range pods {
		infos = append(infos, framework.NewPodInfo(p))
	}
	return framework.NewNodeInfo(n, infos...)
}

func TestNodeUnschedulable(t *testing.T) {
	cordoned := node("n", nil, "1", "1Gi", 10)
	cordoned.Spec.Unschedulable = true
	tolerating := pod("p", nil, "", "")
	tolerating.Spec.Tolerations = []corev1.Toleration{{Key: TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		node *corev1.Node
		want []string
	}{
		{"schedulable", pod("p", nil, "", ""), node("n", nil, "1", "1Gi", 10), nil},
		{"cordoned", pod("p", nil, "", ""), cordoned, []string{ReasonUnschedulable}},
		{"cordoned but tolerated", tolerating, cordoned, nil},
	} {
		if got := NodeUnschedulable(tc.pod, ni(tc.node)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestNodeName(t *testing.T) {
	p := pod("p", nil, "", "")
	if got := NodeName(p, ni(node("a", nil, "1", "1Gi", 10))); got != nil {
		t.Errorf("no nodeName: %v", got)
	}
	p.Spec.NodeName = "b"
	if got := NodeName(p, ni(node("a", nil, "1", "1Gi", 10))); !reflect.DeepEqual(got, []string{ReasonNodeName}) {
		t.Errorf("other node: %v", got)
	}
	if got := NodeName(p, ni(node("b", nil, "1", "1Gi", 10))); got != nil {
		t.Errorf("named node: %v", got)
	}
}

func TestNodeConditions(t *testing.T) {
	for _, tc := range []struct {
		name  string
		conds []corev1.NodeCondition
		want  []string
	}{
		{"no conditions", nil, nil},
		{"ready", []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}, nil},
		{"unknown", []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}, []string{ReasonNotReady}},
		{"network", []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}, {Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionTrue}}, []string{ReasonNetworkUnavailable}},
	} {
		n := node("n", nil, "1", "1Gi", 10)
		n.Status.Conditions = tc.conds
		if got := NodeConditions(ni(n)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestTaintToleration(t *testing.T) {
	taint := corev1.Taint{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoExecute}
	for _, tc := range []struct {
		name   string
		taints []corev1.Taint
		tols   []corev1.Toleration
		want   []string
	}{
		{"untainted", nil, nil, nil},
		{"untolerated NoExecute", []corev1.Taint{taint}, nil, []string{"node(s) had untolerated taint {node.kubernetes.io/unreachable: }"}},
		{"tolerated by Exists", []corev1.Taint{taint}, []corev1.Toleration{{Key: taint.Key, Operator: corev1.TolerationOpExists}}, nil},
		{"tolerated by empty key Exists", []corev1.Taint{taint}, []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, nil},
		{"wrong effect", []corev1.Taint{taint}, []corev1.Toleration{{Key: taint.Key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}, []string{"node(s) had untolerated taint {node.kubernetes.io/unreachable: }"}},
		{"value mismatch", []corev1.Taint{{Key: "k", Value: "a", Effect: corev1.TaintEffectNoSchedule}}, []corev1.Toleration{{Key: "k", Value: "b"}}, []string{"node(s) had untolerated taint {k: a}"}},
		{"value match", []corev1.Taint{{Key: "k", Value: "a", Effect: corev1.TaintEffectNoSchedule}}, []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpEqual, Value: "a"}}, nil},
		{"PreferNoSchedule ignored", []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectPreferNoSchedule}}, nil, nil},
	} {
		n := node("n", nil, "1", "1Gi", 10)
		n.Spec.Taints = tc.taints
		p := pod("p", nil, "", "")
		p.Spec.Tolerations = tc.tols
		if got := TaintToleration(p, ni(n)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestNodeAffinity(t *testing.T) {
	labels := map[string]string{"zone": "a", "gen": "5"}
	term := func(reqs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: reqs}
	}
	req := func(k string, op corev1.NodeSelectorOperator, v ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: k, Operator: op, Values: v}
	}
	for _, tc := range []struct {
		name     string
		selector map[string]string
		terms    []corev1.NodeSelectorTerm
		fields   []corev1.NodeSelectorRequirement
		fits     bool
	}{
		{"nothing", nil, nil, nil, true},
		{"nodeSelector match", map[string]string{"zone": "a"}, nil, nil, true},
		{"nodeSelector mismatch", map[string]string{"zone": "b"}, nil, nil, false},
		{"In", nil, []corev1.NodeSelectorTerm{term(req("zone", corev1.NodeSelectorOpIn, "a", "b"))}, nil, true},
		{"NotIn", nil, []corev1.NodeSelectorTerm{term(req("zone", corev1.NodeSelectorOpNotIn, "a"))}, nil, false},
		{"Exists", nil, []corev1.NodeSelectorTerm{term(req("gen", corev1.NodeSelectorOpExists))}, nil, true},
		{"DoesNotExist", nil, []corev1.NodeSelectorTerm{term(req("gpu", corev1.NodeSelectorOpDoesNotExist))}, nil, true},
		{"Gt", nil, []corev1.NodeSelectorTerm{term(req("gen", corev1.NodeSelectorOpGt, "4"))}, nil, true},
		{"Lt", nil, []corev1.NodeSelectorTerm{term(req("gen", corev1.NodeSelectorOpLt, "4"))}, nil, false},
		{"terms ORed", nil, []corev1.NodeSelectorTerm{term(req("zone", corev1.NodeSelectorOpIn, "x")), term(req("zone", corev1.NodeSelectorOpIn, "a"))}, nil, true},
		{"expressions ANDed", nil, []corev1.NodeSelectorTerm{term(req("zone", corev1.NodeSelectorOpIn, "a"), req("gen", corev1.NodeSelectorOpIn, "4"))}, nil, false},
		{"empty term matches nothing", nil, []corev1.NodeSelectorTerm{{}}, nil, false},
		{"no terms matches nothing", nil, []corev1.NodeSelectorTerm{}, nil, false},
		{"matchFields name", nil, nil, []corev1.NodeSelectorRequirement{req("metadata.name", corev1.NodeSelectorOpIn, "n")}, true},
		{"matchFields other name", nil, nil, []corev1.NodeSelectorRequirement{req("metadata.name", corev1.NodeSelectorOpIn, "m")}, false},
	} {
		p := pod("p", nil, "", "")
		p.Spec.NodeSelector = tc.selector
		if tc.terms != nil || tc.fields != nil {
			terms := tc.terms
			if tc.fields != nil {
				terms = []corev1.NodeSelectorTerm{{MatchFields: tc.fields}}
			}
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
		}
		got := NodeAffinity(framework.NewPodInfo(p), ni(node("n", labels, "1", "1Gi", 10)))
		if (got == nil) != tc.fits {
			t.Errorf("%s: got %v, want fits=%v", tc.name, got, tc.fits)
		}
	}
}

func withPorts(p *corev1.Pod, ports ...corev1.ContainerPort) *corev1.Pod {
	p.Spec.Containers[0].Ports = ports
	return p
}

func TestNodePorts(t *testing.T) {
	existing := withPorts(pod("e", nil, "", ""), corev1.ContainerPort{HostPort: 80, ContainerPort: 80}, corev1.ContainerPort{HostPort: 53, Protocol: corev1.ProtocolUDP, HostIP: "10.0.0.1"})
	for _, tc := range []struct {
		name string
		port corev1.ContainerPort
		fits bool
	}{
		{"free port", corev1.ContainerPort{HostPort: 8080}, true},
		{"same port TCP", corev1.ContainerPort{HostPort: 80}, false},
		{"same port other protocol", corev1.ContainerPort{HostPort: 80, Protocol: corev1.ProtocolUDP}, true},
		{"specific IP against wildcard", corev1.ContainerPort{HostPort: 80, HostIP: "10.0.0.2"}, false},
		{"other IP", corev1.ContainerPort{HostPort: 53, Protocol: corev1.ProtocolUDP, HostIP: "10.0.0.2"}, true},
		{"wildcard against IP", corev1.ContainerPort{HostPort: 53, Protocol: corev1.ProtocolUDP}, false},
		{"container port only", corev1.ContainerPort{ContainerPort: 80}, true},
	} {
		p := framework.NewPodInfo(withPorts(pod("p", nil, "", ""), tc.port))
		if got := NodePorts(p, ni(node("n", nil, "1", "1Gi", 10), existing)); (got == nil) != tc.fits {
			t.Errorf("%s: got %v, want fits=%v", tc.name, got, tc.fits)
		}
	}
}

func TestNodeResourcesFit(t *testing.T) {
	n := node("n", nil, "2", "4Gi", 2)
	for _, tc := range []struct {
		name     string
		existing []*corev1.Pod
		pod      *corev1.Pod
		want     []string
	}{
		{"fits", nil, pod("p", nil, "1", "1Gi"), nil},
		{"fits exactly", []*corev1.Pod{pod("e", nil, "1", "2Gi")}, pod("p", nil, "1", "2Gi"), nil},
		{"cpu", []*corev1.Pod{pod("e", nil, "1500m", "")}, pod("p", nil, "1", ""), []string{ReasonInsufficientCPU}},
		{"cpu and memory", nil, pod("p", nil, "3", "5Gi"), []string{ReasonInsufficientCPU, ReasonInsufficientMemory}},
		{"pod count", []*corev1.Pod{pod("a", nil, "", ""), pod("b", nil, "", "")}, pod("p", nil, "", ""), []string{ReasonTooManyPods}},
		{"no requests always fit resources", []*corev1.Pod{pod("e", nil, "2", "4Gi")}, pod("p", nil, "", ""), nil},
	} {
		got := NodeResourcesFit(framework.NewPodInfo(tc.pod), ni(n, tc.existing...))
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	storage := pod("p", nil, "", "")
	storage.Spec.Containers[0].Resources.Requests[corev1.ResourceEphemeralStorage] = resource.MustParse("20Gi")
	if got := NodeResourcesFit(framework.NewPodInfo(storage), ni(n)); !reflect.DeepEqual(got, []string{ReasonInsufficientStorage}) {
		t.Errorf("ephemeral storage: %v", got)
	}
}
