package scheduler

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedcache "github.com/nodelet/nodelet/controlplane/scheduler/cache"
	"github.com/nodelet/nodelet/controlplane/scheduler/framework"
	"github.com/nodelet/nodelet/controlplane/scheduler/plugins"
	"github.com/nodelet/nodelet/controlplane/scheduler/queue"
)

// Upstream's bounds on the number of feasible nodes a cycle looks for.
const (
	minFeasibleNodesToFind           = 100
	minFeasibleNodesPercentageToFind = 5
	basePercentageOfNodesToScore     = 50
)

// numFeasibleNodesToFind is how many feasible nodes a cycle searches for
// among all nodes: all of a small cluster; else percentage of them (or
// upstream's adaptive 50% minus 1% per 125 nodes, at least 5%), at least
// 100.
func numFeasibleNodesToFind(percentage int32, all int) int {
	if all < minFeasibleNodesToFind {
		return all
	}
	p := int(percentage)
	if p <= 0 {
		p = max(basePercentageOfNodesToScore-all/125, minFeasibleNodesPercentageToFind)
	}
	if p >= 100 {
		return all
	}
	return max(all*p/100, minFeasibleNodesToFind)
}

// scheduleOne runs one scheduling cycle; false once the queue is closed.
func (s *Scheduler) scheduleOne(ctx context.Context) bool {
	qp, ok := s.queue.Pop()
	if !ok {
		return false
	}
	pi := qp.Info
	if pi.Pod.DeletionTimestamp != nil || s.cache.IsAssumed(pi.Key) {
		s.queue.Done(qp)
		return true
	}
	start := time.Now()
	s.cache.UpdateSnapshot(&s.snapshot)
	node, fitErr := s.schedulePod(pi, &s.snapshot)
	if fitErr != nil {
		s.metrics.attempt(resultUnschedulable, start)
		s.handleUnschedulable(ctx, qp, fitErr, s.findPreemption(pi, &s.snapshot))
		return true
	}
	if err := s.cache.AssumePod(pi, node); err != nil {
		s.metrics.attempt(resultError, start)
		s.log.Error("assume pod", "pod", pi.Key, "err", err)
		s.queue.Requeue(qp, false)
		return true
	}
	s.forgetPreemption(pi.Key) // the assumed pod holds its room now
	s.bindAsync(ctx, qp, node, start)
	return true
}

// schedulePod filters a sample of the nodes, scores the feasible ones and
// returns the best, or why none fits.
func (s *Scheduler) schedulePod(pi *framework.PodInfo, snap *schedcache.Snapshot) (string, *FitError) {
	nodes := s.withNominated(pi, snap.Nodes)
	if len(nodes) == 0 {
		return "", &FitError{NumAllNodes: 0}
	}
	st := plugins.PreFilter(pi, nodes, snap.HaveAntiAffinityPods)
	var volumeReason string
	if st.Volumes, volumeReason = s.volumes.volumeState(pi.Pod); volumeReason != "" {
		return "", &FitError{NumAllNodes: len(nodes), PreFilterMsg: volumeReason}
	}
	feasible, reasons := s.findFeasible(st, nodes)
	if len(feasible) == 0 {
		return "", &FitError{NumAllNodes: len(nodes), Reasons: reasons}
	}
	if len(feasible) == 1 {
		return feasible[0].Name(), nil
	}
	sc := plugins.NewScorer(st, s.weights, len(feasible))
	s.parallelize(len(feasible), nil, func(i int) { sc.Raw(i, feasible[i]) })
	return feasible[s.selectHost(sc.Total(feasible))].Name(), nil
}

// findFeasible runs the filters over the nodes in parallel, starting where
// the previous cycle stopped, until enough feasible nodes are found; it
// returns them, and the rejection reasons counted over the nodes examined.
func (s *Scheduler) findFeasible(st *plugins.State, nodes []*framework.NodeInfo) ([]*framework.NodeInfo, map[string]int) {
	all := len(nodes)
	want := numFeasibleNodesToFind(s.cfg.PercentageOfNodesToScore, all)
	feasible := make([]*framework.NodeInfo, want)
	var found, rejected atomic.Int32
	var mu sync.Mutex
	var stop atomic.Bool
	reasons := map[string]int{}
	start := s.nextStart % all
	s.parallelize(all, &stop, func(i int) {
		n := nodes[(start+i)%all]
		if r := plugins.Filter(st, n); r != nil {
			rejected.Add(1)
			mu.Lock()
			for _, x := range r {
				reasons[x]++
			}
			mu.Unlock()
			return
		}
		k := int(found.Add(1))
		if k >= want {
			stop.Store(true)
		}
		if k > want {
			return
		}
		feasible[k-1] = n
	})
	got := min(int(found.Load()), want)
	s.nextStart = (start + got + int(rejected.Load())) % all
	return feasible[:got], reasons
}

// Work distribution for parallelize: pieces are taken in batches from a
// shared counter; helpers start only once the calling goroutine has worked
// for spawnAfter without finishing. Filters and scores are cheap for most
// pods (tens of ns per node), and on a busy machine waking goroutines costs
// more than the work; expensive cycles (inter-pod affinity over many nodes)
// still fan out to Parallelism workers.
const (
	parallelBatch = 16
	spawnAfter    = 200 * time.Microsecond
)

// parallelize runs f(0..n-1) on up to Parallelism goroutines (the caller's
// included) until all pieces ran or stop is set.
func (s *Scheduler) parallelize(n int, stop *atomic.Bool, f func(i int)) {
	var next atomic.Int64
	work := func(until time.Time) bool {
		for stop == nil || !stop.Load() {
			hi := int(next.Add(parallelBatch))
			lo := hi - parallelBatch
			if lo >= n {
				return true
			}
			for i := lo; i < min(hi, n); i++ {
				f(i)
			}
			if !until.IsZero() && time.Now().After(until) {
				return false
			}
		}
		return true
	}
	if work(time.Now().Add(spawnAfter)) || s.cfg.Parallelism <= 1 {
		work(time.Time{})
		return
	}
	var wg sync.WaitGroup
	for w := 1; w < s.cfg.Parallelism; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work(time.Time{})
		}()
	}
	work(time.Time{})
	wg.Wait()
}

// selectHost returns the index of the highest total, choosing at random
// among ties (reservoir sampling).
func (s *Scheduler) selectHost(totals []int64) int {
	best, ties := 0, 1
	for i := 1; i < len(totals); i++ {
		switch {
		case totals[i] > totals[best]:
			best, ties = i, 1
		case totals[i] == totals[best]:
			ties++
			if s.rand.IntN(ties) == 0 {
				best = i
			}
		}
	}
	return best
}

// bindAsync binds the assumed pod in a goroutine. On failure the assumed
// pod is forgotten and requeued with backoff; the pod stays in flight in
// the queue until then, so updates meanwhile are not lost.
// start is when the scheduling cycle began: the attempt ends with binding.
func (s *Scheduler) bindAsync(ctx context.Context, qp *queue.QueuedPod, node string, start time.Time) {
	s.inflight.Add(1)
	go func() {
		defer s.inflight.Done()
		select {
		case s.bindSem <- struct{}{}:
		case <-ctx.Done():
			s.cache.ForgetPod(qp.Info.Key)
			return
		}
		defer func() { <-s.bindSem }()
		pod := qp.Info.Pod
		// The pod's claims first (upstream's PreBind): binding the pod
		// before its volumes exist would start it on a node they never
		// reach.
		err := s.bindVolumes(ctx, pod, node)
		if err == nil {
			err = s.client.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
				ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
				Target:     corev1.ObjectReference{Kind: "Node", Name: node},
			}, metav1.CreateOptions{})
		}
		if err != nil {
			s.cache.ForgetPod(qp.Info.Key)
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				return
			}
			s.metrics.attempt(resultError, start)
			s.log.Info("binding rejected", "pod", qp.Info.Key, "node", node, "err", err)
			if !apierrors.IsNotFound(err) {
				s.recorder.Eventf(pod, corev1.EventTypeWarning, "FailedScheduling", "Binding rejected: %v", err)
			}
			s.queue.Requeue(qp, false)
			return
		}
		s.metrics.attempt(resultScheduled, start)
		s.recorder.Eventf(pod, corev1.EventTypeNormal, "Scheduled", "Successfully assigned %s to %s", qp.Info.Key, node)
		s.queue.Done(qp)
	}()
}
