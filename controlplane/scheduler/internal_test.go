package scheduler

import (
	"fmt"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/controlplane/scheduler/framework"
	"github.com/nodelet/nodelet/controlplane/scheduler/plugins"
)

func TestFitErrorMessage(t *testing.T) {
	for _, tc := range []struct {
		err  FitError
		want string
	}{
		{FitError{NumAllNodes: 3, Reasons: map[string]int{"Insufficient cpu": 2, "node(s) had untolerated taint {node.kubernetes.io/unreachable: }": 1}},
			"0/3 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }, 2 Insufficient cpu."},
		{FitError{NumAllNodes: 1, Reasons: map[string]int{"Insufficient cpu": 1, "Insufficient memory": 1}},
			"0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory."},
		{FitError{}, "no nodes available to schedule pods"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
	}
}

func TestNumFeasibleNodesToFind(t *testing.T) {
	for _, tc := range []struct {
		pct       int32
		all, want int
	}{
		{0, 50, 50}, {0, 99, 99}, {0, 100, 100}, {0, 1000, 420}, {0, 5000, 500}, {0, 6000, 300},
		{0, 100000, 5000}, {10, 500, 100}, {30, 5000, 1500}, {100, 5000, 5000},
	} {
		if got := numFeasibleNodesToFind(tc.pct, tc.all); got != tc.want {
			t.Errorf("pct %d all %d: got %d, want %d", tc.pct, tc.all, got, tc.want)
		}
	}
}

func TestSelectHostBreaksTiesAtRandom(t *testing.T) {
	s := &Scheduler{rand: rand.New(rand.NewPCG(1, 2))}
	counts := map[int]int{}
	for range 3000 {
		counts[s.selectHost([]int64{5, 9, 1, 9, 9})]++
	}
	if counts[0]+counts[2] != 0 || counts[1] < 800 || counts[3] < 800 || counts[4] < 800 {
		t.Errorf("picks %v: want only 1, 3, 4, about equally", counts)
	}
}

func benchNodes(n int) []*framework.NodeInfo {
	out := make([]*framework.NodeInfo, n)
	for i := range out {
		out[i] = framework.NewNodeInfo(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i)},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("10")}}})
	}
	return out
}

func TestFindFeasibleSamplesAndRotates(t *testing.T) {
	for _, par := range []int{1, 4} {
		s := &Scheduler{cfg: Config{Parallelism: par}}
		nodes := benchNodes(1000)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
		st := plugins.PreFilter(framework.NewPodInfo(pod), nodes, false)
		feasible, reasons := s.findFeasible(st, nodes)
		if len(feasible) != 420 || len(reasons) != 0 {
			t.Fatalf("parallelism %d: %d feasible (want 420), reasons %v", par, len(feasible), reasons)
		}
		if s.nextStart < 420 {
			t.Errorf("parallelism %d: next start %d, want past the nodes examined", par, s.nextStart)
		}
		start := s.nextStart
		feasible, _ = s.findFeasible(st, nodes)
		if len(feasible) != 420 || feasible[0] == nodes[0] && start != 0 {
			t.Errorf("parallelism %d: second cycle did not start at %d", par, start)
		}
	}
}
