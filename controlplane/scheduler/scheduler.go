// Package scheduler assigns pending pods to nodes the way kube-scheduler's
// default profile does: a priority queue with backoff, a cache of nodes and
// of pods on them (bound and assumed), parallel filters and scores over a
// sample of the nodes, asynchronous binding through pods/binding, and
// preemption of lower-priority pods when a pod fits nowhere.
//
// A scheduling cycle makes no API call: it reads an immutable snapshot of
// the cache, assumes the pod onto the chosen node and hands the binding to
// a goroutine. A failed binding forgets the assumed pod and requeues it.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	schedcache "github.com/nodelet/nodelet/controlplane/scheduler/cache"
	"github.com/nodelet/nodelet/controlplane/scheduler/plugins"
	"github.com/nodelet/nodelet/controlplane/scheduler/queue"
)

// DefaultSchedulerName is the spec.schedulerName this scheduler serves by
// default.
const DefaultSchedulerName = corev1.DefaultSchedulerName

// Config configures a Scheduler.
type Config struct {
	Client    kubernetes.Interface
	Informers informers.SharedInformerFactory
	Recorder  record.EventRecorder
	Log       *slog.Logger

	// SchedulerName: pods whose spec.schedulerName differs are left alone
	// (default "default-scheduler").
	SchedulerName string
	// PercentageOfNodesToScore bounds how many feasible nodes a cycle looks
	// for, as a percentage of all nodes (at least 100 nodes). 0 is upstream's
	// adaptive value: 50% falling to 5% as the cluster grows.
	PercentageOfNodesToScore int32
	// Parallelism is the number of workers filtering and scoring nodes
	// (default 16).
	Parallelism int
	// Weights of the score plugins by name (plugins.DefaultWeights is
	// upstream's default profile); missing names keep their default.
	Weights map[string]int32
	// Rand breaks ties between equally scored nodes (default: seeded
	// randomly). Only the scheduling goroutine uses it.
	Rand *rand.Rand
	// MaxConcurrentBinds bounds bindings in flight (default 256).
	MaxConcurrentBinds int
	// Queue tunes backoff and the unschedulable timeout.
	Queue queue.Options
	// Metrics, when set, records scheduling attempts (see metrics.go).
	Metrics *Metrics
}

// Scheduler schedules pods. Create with New, then Run.
type Scheduler struct {
	cfg      Config
	log      *slog.Logger
	client   kubernetes.Interface
	recorder record.EventRecorder
	weights  plugins.Weights
	rand     *rand.Rand
	metrics  profileMetrics

	cache   *schedcache.Cache
	queue   *queue.Queue
	pdbs    pdbLister
	volumes volumeListers
	// preempting holds the preemption each pod last started, by pod key,
	// until the pod is bound or deleted (see preempt.go).
	preemptMu  sync.Mutex
	preempting map[string]Nomination

	synced   []cache.InformerSynced
	bindSem  chan struct{}
	inflight sync.WaitGroup
	// Owned by the scheduling loop.
	snapshot  schedcache.Snapshot
	nextStart int // rotating start index into the node list
}

// New validates cfg and registers the informer handlers; start the
// informer factory after New.
func New(cfg Config) (*Scheduler, error) {
	if cfg.Client == nil || cfg.Informers == nil || cfg.Recorder == nil {
		return nil, errors.New("scheduler: Client, Informers and Recorder are required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.SchedulerName == "" {
		cfg.SchedulerName = DefaultSchedulerName
	}
	if cfg.PercentageOfNodesToScore < 0 || cfg.PercentageOfNodesToScore > 100 {
		return nil, fmt.Errorf("scheduler: percentageOfNodesToScore %d not in 0..100", cfg.PercentageOfNodesToScore)
	}
	if cfg.Parallelism <= 0 {
		cfg.Parallelism = 16
	}
	if cfg.MaxConcurrentBinds <= 0 {
		cfg.MaxConcurrentBinds = 256
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	s := &Scheduler{
		cfg: cfg, log: cfg.Log.With("component", "scheduler"),
		client: cfg.Client, recorder: cfg.Recorder,
		weights: plugins.CompileWeights(cfg.Weights), rand: cfg.Rand,
		cache: schedcache.New(), queue: queue.New(cfg.Queue),
		bindSem:    make(chan struct{}, cfg.MaxConcurrentBinds),
		preempting: map[string]Nomination{},
	}
	s.metrics = cfg.Metrics.forProfile(cfg.SchedulerName, s.queue.Lens)
	pods := cfg.Informers.Core().V1().Pods().Informer()
	nodes := cfg.Informers.Core().V1().Nodes().Informer()
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: s.onPodAdd, UpdateFunc: s.onPodUpdate, DeleteFunc: s.onPodDelete,
	}); err != nil {
		return nil, fmt.Errorf("scheduler: pod handler: %w", err)
	}
	if _, err := nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: s.onNodeAdd, UpdateFunc: s.onNodeUpdate, DeleteFunc: s.onNodeDelete,
	}); err != nil {
		return nil, fmt.Errorf("scheduler: node handler: %w", err)
	}
	pdbs := cfg.Informers.Policy().V1().PodDisruptionBudgets()
	s.pdbs = pdbs.Lister()
	s.synced = []cache.InformerSynced{pods.HasSynced, nodes.HasSynced, pdbs.Informer().HasSynced}
	if err := s.watchVolumes(cfg.Informers); err != nil {
		return nil, err
	}
	return s, nil
}

// Run schedules pods until ctx ends, then waits for bindings in flight.
func (s *Scheduler) Run(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), s.synced...) {
		return fmt.Errorf("scheduler: wait for caches: %w", ctx.Err())
	}
	s.log.Info("scheduler started", "schedulerName", s.cfg.SchedulerName)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.queue.Run(ctx)
	}()
	for s.scheduleOne(ctx) {
	}
	wg.Wait()
	s.inflight.Wait()
	return nil
}

// Cache exposes the scheduler's cache (read-only use: tests, debugging).
func (s *Scheduler) Cache() *schedcache.Cache { return s.cache }

// Queue exposes the scheduling queue (read-only use: tests, debugging).
func (s *Scheduler) Queue() *queue.Queue { return s.queue }

// retryTimeout bounds API calls made off the scheduling path.
const retryTimeout = 30 * time.Second
