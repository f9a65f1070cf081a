package nodelet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nodelet/nodelet/podlifecycle"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	utilkernel "k8s.io/kubernetes/pkg/util/kernel"

	"github.com/nodelet/nodelet/admission"
	"github.com/nodelet/nodelet/containerlogs"
	"github.com/nodelet/nodelet/eviction"
	"github.com/nodelet/nodelet/localpath"
	"github.com/nodelet/nodelet/nodecerts"
	"github.com/nodelet/nodelet/nodestatus"
	"github.com/nodelet/nodelet/pleg"
	"github.com/nodelet/nodelet/podworkers"
	"github.com/nodelet/nodelet/prober"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/containerd"
	"github.com/nodelet/nodelet/runtimeclass"
	"github.com/nodelet/nodelet/status"
)

// wired is the running agent's parts.
type wired struct {
	*components
	status  *status.Manager
	node    *nodestatus.Syncer
	pleg    *pleg.PLEG
	workers *podworkers.Workers
	board   *podworkers.Board // the workers' lifecycle snapshots
	pods    cache.SharedIndexInformer
	factory informers.SharedInformerFactory
	// services feed the containers' service environment variables.
	services   cache.SharedIndexInformer
	svcFactory informers.SharedInformerFactory
	hints      chan struct{} // runtime events -> PLEG relists

	probes   *prober.Manager
	orphans  *podlifecycle.Orphans
	admitter *podlifecycle.Admitter

	// evict publishes the node's pressure; evictions are the pods it
	// evicted whose termination is not over (eviction.go).
	evict     *eviction.Manager
	pressure  *eviction.NodePressure
	evictions *podlifecycle.Evictions

	// logDrops reports what the container logger dropped (nil without it).
	logDrops *containerlogs.DropReporter
	// serving renews the API's serving certificate (ServerTLSBootstrap).
	serving *nodecerts.Serving
}

// wire builds the node's parts in the order their reads need, so that
// every part gets what it reads when it is made and calls go one way: the
// boards (the workers' lifecycle, the eviction manager's pressure) and the
// pod informer first, then the status writers and the PLEG, the prober,
// the Service informers, the Syncer and its workers, then what reads the
// workers (orphans, admission, eviction), and last the informer's feed
// into the workers.
func (a *Agent) wire(ctx context.Context, c *components) (*wired, error) {
	recorder, nodeEvent := a.events(ctx)
	w := &wired{components: c, hints: make(chan struct{}, 1), evictions: podlifecycle.NewEvictions(),
		board: podworkers.NewBoard(), pressure: eviction.NewNodePressure()}
	if err := a.podInformer(w); err != nil {
		return nil, err
	}
	if err := a.wireNode(ctx, w, nodeEvent); err != nil {
		return nil, err
	}
	w.probes = prober.New(prober.Config{
		Exec: probeExec(c.rt), Log: a.log.With("component", "prober"), Metrics: a.metrics,
		Recorder: func(pod *corev1.Pod, container, eventtype, reason, message string) {
			recorder.Eventf(podlifecycle.PodReference(pod, podlifecycle.ContainerFieldPath(pod, container)), eventtype, reason, "%s", message)
		},
	})
	// One factory of Services and EndpointSlices serves the pods'
	// environment, the proxy and the cluster DNS: one watch of each per
	// node. Every node holds all of them, so what none of those reads
	// (managed fields, annotations) is dropped on arrival. The same
	// factory holds the RuntimeClasses, as kubelet watches them all.
	w.svcFactory = informers.NewSharedInformerFactoryWithOptions(a.client, 0, informers.WithTransform(dropUnread))
	w.services = w.svcFactory.Core().V1().Services().Informer()
	w.svcFactory.Discovery().V1().EndpointSlices().Informer() // registered before Start
	w.svcFactory.Node().V1().RuntimeClasses().Informer()
	if err := a.wireWorkers(w, recorder); err != nil {
		return nil, err
	}
	if err := a.wirePodLife(w); err != nil {
		return nil, err
	}
	var err error
	if w.evict, err = a.evictionManager(ctx, w, recorder, nodeEvent); err != nil {
		return nil, err
	}
	w.logDrops = a.logDropReporter(w, recorder)
	if err := a.feedWorkers(w); err != nil {
		return nil, err
	}
	return w, nil
}

// wireNode makes the pod status writer, the PLEG and the node status.
func (a *Agent) wireNode(ctx context.Context, w *wired, nodeEvent func(eventtype, reason, message string)) error {
	w.status = status.NewManager(status.ManagerConfig{Client: a.client, Log: a.log.With("component", "status"),
		PodCouldHaveRunningContainers: func(uid types.UID) bool { return !w.board.Lifecycle().Terminated(uid) },
		CachedPod:                     func(ns, name string) *corev1.Pod { return cachedPod(w, ns, name) }})
	var err error
	w.pleg, err = pleg.New(pleg.Config{List: w.rt.PodStatuses, Events: w.hints, Log: a.log.With("component", "pleg"), Metrics: a.metrics})
	if err != nil {
		return fmt.Errorf("nodelet: %w", err)
	}
	p, net := w.pleg, w.net
	w.node, err = nodestatus.New(nodestatus.Config{Client: a.client, NodeName: a.cfg.NodeName, NodeIP: a.cfg.NodeIP,
		APIServer: apiServerURL(a.cfg.RestConfig), RootDir: a.cfg.RootDir, PodCIDR: a.cfg.PodCIDR,
		SystemReserved: a.cfg.SystemReserved, KubeReserved: a.cfg.KubeReserved,
		MaxPods: a.cfg.MaxPods, Labels: a.cfg.NodeLabels, Taints: a.cfg.RegisterWithTaints,
		Annotations: map[string]string{localpath.AnnotationDir: a.cfg.LocalPathDir,
			nodestatus.AnnotationControllerManagedAttach: "true"},
		ContainerRuntimeVersion: runtimeVersion(ctx, w.rt), Event: nodeEvent, DaemonPort: int32(max(a.cfg.Port, 0)),
		Readiness: func() error { return readiness(p, net) }, Images: nodestatus.CachedImages(ctx, w.rt.ListImages, time.Now),
		VolumesInUse: w.vols.VolumesInUse,
		Pressure:     w.pressure.Pressure, PressureChanged: w.pressure.Changed(),
		Log: a.log.With("component", "nodestatus")})
	if err != nil {
		return fmt.Errorf("nodelet: %w", err)
	}
	return nil
}

// wireWorkers makes the Syncer and the pod workers that call it.
func (a *Agent) wireWorkers(w *wired, recorder podlifecycle.EventRecorder) error {
	resolv, err := a.hostResolvConf()
	if err != nil {
		return err
	}
	services := w.svcFactory.Core().V1().Services().Lister()
	classes := runtimeclass.New(w.svcFactory.Node().V1().RuntimeClasses().Lister(), a.client.NodeV1().RuntimeClasses())
	board := w.board
	syncer, err := podlifecycle.NewSyncer(podlifecycle.SyncerConfig{Runtime: w.rt, Network: w.net, Cgroups: w.cg, CgroupDriver: w.driver,
		Volumes: w.vols, Status: w.status, Evicted: w.evictions, PodStatus: w.rt.PodStatus,
		Backoff:  runtime.NewBackoff(10*time.Second, 5*time.Minute, time.Now),
		Recorder: pullTimingRecorder{recorder, a.metrics.PodStart()}, Probes: w.probes, RuntimeHandler: classes.Handler,
		Services:   func() ([]*corev1.Service, error) { return services.List(labels.Everything()) },
		Objects:    podlifecycle.APIObjects{Client: a.client},
		PauseImage: a.cfg.PodInfraImage, NodeName: a.cfg.NodeName, NodeIP: w.node.Host().InternalIP,
		ClusterDNS: a.cfg.ClusterDNS, ClusterDomain: a.cfg.ClusterDomain, HostResolvConf: resolv,
		PodFilesDir: filepath.Join(a.cfg.RootDir, "pod-files"), LogRoot: a.cfg.LogRoot, OOMScoreAdjFloor: w.floor,
		MemoryCapacity: w.node.Host().MemoryBytes, Allocatable: w.alloc, Log: a.log.With("component", "syncer"),
		PodContentRemovable: func(uid types.UID) bool { return board.Lifecycle().ContentRemovable(uid) }})
	if err != nil {
		return err
	}
	w.workers = podworkers.New(podworkers.Config{Syncer: syncer,
		Board: w.board, Log: a.log.With("component", "podworkers")})
	return nil
}

// wirePodLife makes what reads the workers' lifecycle: the orphan finder
// and admission.
func (a *Agent) wirePodLife(w *wired) error {
	sysctls, err := a.sysctlAdmission()
	if err != nil {
		return err
	}
	plegCache := w.pleg.Cache()
	w.orphans = podlifecycle.NewOrphans(podlifecycle.OrphansConfig{
		RuntimePods: func() []*runtime.PodStatus {
			var out []*runtime.PodStatus
			for _, uid := range plegCache.UIDs() {
				st, _ := plegCache.Get(uid)
				out = append(out, st)
			}
			return out
		},
		CgroupPods: w.cg.ListPods, VolumePods: w.vols.ListPods,
		InAPI:     func(uid types.UID) bool { return podByUID(w, uid) != nil },
		Lifecycle: w.board.Lifecycle,
		LogRoot:   a.cfg.LogRoot, Log: a.log.With("component", "orphans"),
	})
	node := w.node
	w.admitter = podlifecycle.NewAdmitter(podlifecycle.AdmitterConfig{
		Handler: admission.Chain{
			// First, as upstream's eviction admit handler: under pressure the
			// refusal says so whatever else would refuse the pod.
			admission.NodePressure(w.pressure.Conditions, eviction.IsCriticalPod),
			sysctls,
			admission.Security(),
			admission.ResourcesFit(func() corev1.ResourceList {
				return nodestatus.Allocatable(nodestatus.Capacity(node.Host(), a.maxPods()), a.cfg.SystemReserved, a.cfg.KubeReserved)
			}),
			admission.HostPorts(),
		},
		Lifecycle: w.board.Lifecycle, Pods: func() []*corev1.Pod { return informerPods(w) },
		Status: w.status, Log: a.log.With("component", "admission"),
	})
	return nil
}

// sysctlAdmission is upstream's sysctl admit handler: the sysctls safe on
// this kernel and --allowed-unsafe-sysctls.
func (a *Agent) sysctlAdmission() (admission.Handler, error) {
	kernel, err := utilkernel.GetVersion()
	if err != nil {
		a.log.Warn("kernel version unknown: only the sysctls safe on every kernel are allowed", "err", err)
	}
	h, err := admission.Sysctls(admission.SafeSysctls(kernel), a.cfg.AllowedUnsafeSysctls)
	if err != nil {
		return nil, fmt.Errorf("nodelet: allowed unsafe sysctls: %w", err)
	}
	return h, nil
}

func (a *Agent) maxPods() int { return a.cfg.MaxPods }

// hostResolvConf reads the ResolvConf file; nil without one lets the
// Syncer read /etc/resolv.conf.
func (a *Agent) hostResolvConf() ([]byte, error) {
	if a.cfg.ResolvConf == "" {
		return nil, nil
	}
	data, err := os.ReadFile(a.cfg.ResolvConf)
	if err != nil {
		return nil, fmt.Errorf("nodelet: read resolv.conf: %w", err)
	}
	return data, nil
}

// events starts the event broadcaster (client-go's: rate-limited,
// aggregated, written through the API) until ctx ends, and returns the
// pods' recorder and the node's.
func (a *Agent) events(ctx context.Context) (record.EventRecorder, func(eventtype, reason, message string)) {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: a.client.CoreV1().Events("")})
	go func() { <-ctx.Done(); b.Shutdown() }()
	rec := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: a.cfg.NodeName})
	node := &corev1.ObjectReference{Kind: "Node", Name: a.cfg.NodeName, UID: types.UID(a.cfg.NodeName)}
	return rec, func(eventtype, reason, message string) { rec.Event(node, eventtype, reason, message) }
}

// probeExec runs exec probes in the container through containerd; an
// error only when the command could not run (a timeout wraps the
// context's error, which the prober reports as a timed-out probe).
func probeExec(rt *containerd.Runtime) prober.ExecFunc {
	return func(ctx context.Context, id string, cmd []string, _ time.Duration) ([]byte, int, error) {
		out, code, err := rt.ExecSync(ctx, id, cmd)
		if err != nil && ctx.Err() != nil {
			return out, -1, fmt.Errorf("exec probe: %w: %w", ctx.Err(), err)
		}
		return out, code, err
	}
}

// apiServerURL is the server the nodelet talks to, which picks the node's
// address when --node-ip is not given ("" with an injected client).
func apiServerURL(cfg *rest.Config) string {
	if cfg == nil {
		return ""
	}
	return cfg.Host
}
