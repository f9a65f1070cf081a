// Package nodemetrics is the resource-metrics pipeline without an add-on:
// it reads every Ready node's nodelet summary (/stats/summary) on demand
// and turns it into metrics.k8s.io NodeMetrics and PodMetrics, the objects
// metrics-server would serve, for the API server's metrics.k8s.io group
// (kubectl top, autoscalers).
//
// There is no background scraping: a request scrapes all nodes in
// parallel, and the result is kept for CacheTTL so that a burst of
// requests (kubectl top asks for metrics, then for the objects) reaches
// each nodelet once. Concurrent requests share one scrape.
//
// CPU is the nodelet's own rate (usageNanoCores), measured by the nodelet
// over its sampling interval; the summary does not say how long that was,
// so the reported window is Config.Window. Memory is the working set, as
// for the kubelet and metrics-server.
package nodemetrics

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/singleflight"
	corev1 "k8s.io/api/core/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// SummaryPath is the nodelet endpoint read for each node.
const SummaryPath = "/stats/summary"

// Defaults for Config.
const (
	DefaultTimeout     = 5 * time.Second
	DefaultCacheTTL    = 5 * time.Second
	DefaultWindow      = 10 * time.Second
	DefaultParallelism = 16
)

// Config configures New. ListNodes, ListPods and Fetch are required.
type Config struct {
	// ListNodes lists the cluster's nodes.
	ListNodes func(ctx context.Context) ([]corev1.Node, error)
	// ListPods lists the pods of a namespace ("" = all namespaces).
	ListPods func(ctx context.Context, namespace string) ([]corev1.Pod, error)
	// Fetch GETs path on the node's nodelet and returns the body of
	// a 200 answer.
	Fetch func(ctx context.Context, node *corev1.Node, path string) ([]byte, error)

	// Timeout bounds reading one node (default 5s).
	Timeout time.Duration
	// CacheTTL is how long one scrape answers requests (default 5s).
	CacheTTL time.Duration
	// Window is reported as the metrics' window: the interval over which
	// the nodelets compute CPU rates (default 10s).
	Window time.Duration
	// Parallelism bounds the nodes read at once (default 16).
	Parallelism int
	// Now is the clock (default time.Now).
	Now func() time.Time
	Log *slog.Logger
}

// Source serves NodeMetrics and PodMetrics from the nodelets. It is safe
// for concurrent use.
type Source struct {
	cfg    Config
	log    *slog.Logger
	flight singleflight.Group

	mu   sync.Mutex
	last *scrape
}

// scrape is one read of every Ready node.
type scrape struct {
	at        time.Time
	nodes     []corev1.Node                     // the Ready nodes, by name
	summaries map[string]*statsv1alpha1.Summary // by node name; nodes that failed are absent
}

// New builds a Source.
func New(cfg Config) *Source {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.CacheTTL <= 0 {
		cfg.CacheTTL = DefaultCacheTTL
	}
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.Parallelism <= 0 {
		cfg.Parallelism = DefaultParallelism
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Source{cfg: cfg, log: cfg.Log.With("component", "nodemetrics")}
}

// NodeMetrics returns the metrics of every Ready node that answered, by name.
func (s *Source) NodeMetrics(ctx context.Context) ([]metricsv1beta1.NodeMetrics, error) {
	sc, err := s.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	now := s.cfg.Now()
	out := make([]metricsv1beta1.NodeMetrics, 0, len(sc.nodes))
	for i := range sc.nodes {
		node := &sc.nodes[i]
		sum := sc.summaries[node.Name]
		if sum == nil {
			continue
		}
		if m, ok := nodeMetrics(node, &sum.Node, s.cfg.Window, now); ok {
			out = append(out, m)
		}
	}
	return out, nil
}

// PodMetrics returns the metrics of the running pods of namespace ("" =
// all namespaces) that a node reported, sorted by namespace and name. Pods
// the API no longer has are left out.
func (s *Source) PodMetrics(ctx context.Context, namespace string) ([]metricsv1beta1.PodMetrics, error) {
	sc, err := s.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	pods, err := s.cfg.ListPods(ctx, namespace)
	if err != nil {
		return nil, fmt.Errorf("nodemetrics: list pods: %w", err)
	}
	type key struct{ namespace, name string }
	byKey := make(map[key]*corev1.Pod, len(pods))
	for i := range pods {
		byKey[key{pods[i].Namespace, pods[i].Name}] = &pods[i]
	}
	now := s.cfg.Now()
	var out []metricsv1beta1.PodMetrics
	for _, sum := range sc.summaries {
		for i := range sum.Pods {
			ps := &sum.Pods[i]
			k := key{ps.PodRef.Namespace, ps.PodRef.Name}
			pod := byKey[k]
			if pod == nil {
				continue
			}
			if m, ok := podMetrics(pod, ps, s.cfg.Window, now); ok {
				out = append(out, m)
				delete(byKey, k) // reported once, even if two nodes claim it
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// snapshot returns a scrape at most CacheTTL old, starting one (or joining
// the one in flight) if there is none. The scrape outlives a caller that
// gives up: others may be waiting for it.
func (s *Source) snapshot(ctx context.Context) (*scrape, error) {
	s.mu.Lock()
	last := s.last
	s.mu.Unlock()
	if last != nil && s.cfg.Now().Sub(last.at) < s.cfg.CacheTTL {
		return last, nil
	}
	ch := s.flight.DoChan("scrape", func() (any, error) {
		sc, err := s.scrape(context.WithoutCancel(ctx))
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.last = sc
		s.mu.Unlock()
		return sc, nil
	})
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case res := <-ch:
		if res.Err != nil {
			return nil, res.Err
		}
		return res.Val.(*scrape), nil
	}
}

// scrape reads the summary of every Ready node, at most Parallelism at a
// time. A node that fails is logged and left out; only failing to list
// the nodes fails the scrape.
func (s *Source) scrape(ctx context.Context) (*scrape, error) {
	listCtx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	all, err := s.cfg.ListNodes(listCtx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("nodemetrics: list nodes: %w", err)
	}
	sc := &scrape{summaries: map[string]*statsv1alpha1.Summary{}}
	for _, n := range all {
		if nodeReady(&n) {
			sc.nodes = append(sc.nodes, n)
		}
	}
	sort.Slice(sc.nodes, func(i, j int) bool { return sc.nodes[i].Name < sc.nodes[j].Name })

	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(s.cfg.Parallelism)
	for i := range sc.nodes {
		node := &sc.nodes[i]
		name := node.Name
		g.Go(func() error {
			sum, err := s.fetch(ctx, node)
			if err != nil {
				s.log.Warn("cannot read node metrics", "node", name, "err", err)
				return nil
			}
			mu.Lock()
			sc.summaries[name] = sum
			mu.Unlock()
			return nil
		})
	}
	g.Wait()
	sc.at = s.cfg.Now()
	return sc, nil
}

func (s *Source) fetch(ctx context.Context, node *corev1.Node) (*statsv1alpha1.Summary, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	body, err := s.cfg.Fetch(ctx, node, SummaryPath)
	if err != nil {
		return nil, err
	}
	var sum statsv1alpha1.Summary
	if err := json.Unmarshal(body, &sum); err != nil {
		return nil, fmt.Errorf("decode summary of node %q: %w", node.Name, err)
	}
	return &sum, nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
