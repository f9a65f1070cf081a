package nodelet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/nodelet/nodelet/peerroutes"
	"github.com/nodelet/nodelet/podlifecycle"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/nodelet/nodelet/admission"
	"github.com/nodelet/nodelet/eviction"
	"github.com/nodelet/nodelet/nodestatus"
	"github.com/nodelet/nodelet/pleg"
	"github.com/nodelet/nodelet/podworkers"
	"github.com/nodelet/nodelet/prober"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/containerd"
	"github.com/nodelet/nodelet/stats"
	"github.com/nodelet/nodelet/status"
)

const uidIndex = "uid"

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
}

// Run runs the node agent until ctx ends. On the way out it stops its
// loops and the pod workers without killing any pod. It first takes the
// instance locks: a second nodelet on the same root directory or
// containerd namespace fails with ErrLocked having touched nothing.
func (a *Agent) Run(ctx context.Context) error {
	locks, err := lockInstance(a.cfg)
	if err != nil {
		return fmt.Errorf("nodelet: %w", err)
	}
	defer locks.Release()
	hz, err := a.listenHealthz()
	if err != nil {
		return err
	}
	if hz != nil {
		defer hz.Close() // Serve closes it too; this covers a failed start
	}
	c, err := a.setup(ctx)
	if err != nil {
		return err
	}
	defer c.rt.Close()
	w, err := a.wire(ctx, c)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	goRun := func(name string, f func(context.Context) error) {
		wg.Go(func() {
			if err := f(ctx); err != nil && ctx.Err() == nil {
				a.log.Error("loop ended", "loop", name, "err", err)
			}
		})
	}
	defer func() {
		cancel()
		w.workers.Shutdown() // never kills pods
		w.probes.Stop()
		wg.Wait()
		a.log.Info("nodelet stopped")
	}()
	goRun("status", w.status.Run)
	goRun("nodestatus", w.node.Run)
	goRun("runtime events", func(ctx context.Context) error { a.forwardEvents(ctx, c.rt, w.hints); return nil })
	goRun("pleg", w.pleg.Run)
	if a.logs != nil {
		goRun("container logger", a.logs.Run)
	}
	if hz != nil {
		h := healthzHandler(loopsHealthy(w.pleg, w.rt))
		goRun("healthz", func(ctx context.Context) error { return serveHealthz(ctx, hz, h, a.log) })
	}
	if a.cfg.Port > 0 {
		collector, err := stats.New(stats.Config{NodeName: a.cfg.NodeName, Runtime: c.rt, Log: a.log.With("component", "stats")})
		if err != nil {
			return fmt.Errorf("nodelet: %w", err)
		}
		goRun("stats", collector.Run)
		api, err := a.apiServer(w, collector)
		if err != nil {
			return err
		}
		// Listen here so that a port in use fails the start.
		ln, err := net.Listen("tcp", net.JoinHostPort(a.cfg.Address, strconv.Itoa(a.cfg.Port)))
		if err != nil {
			return fmt.Errorf("nodelet: API: %w", err)
		}
		goRun("api", func(ctx context.Context) error { return api.Serve(ctx, ln) })
	}
	started := make(chan struct{}) // closed once the node can run pods
	if a.cfg.Notifier != nil {
		goRun("systemd", a.notifySystemd(started, w))
	}

	cidr, err := w.node.WaitPodCIDR(ctx)
	if err != nil {
		return nilIfDone(ctx, err)
	}
	if err := c.net.EnsureConfig(cidr); err != nil {
		return fmt.Errorf("nodelet: CNI config for %s: %w", cidr, err)
	}
	w.node.UpdateNow()
	w.factory.Start(ctx.Done())
	w.svcFactory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), w.pods.HasSynced, w.services.HasSynced) {
		return nilIfDone(ctx, errors.New("nodelet: pod informer did not sync"))
	}
	a.log.Info("nodelet running", "podCIDR", cidr)
	close(started)
	goRun("pod events", func(ctx context.Context) error { a.podEvents(ctx, w); return nil })
	goRun("housekeeping", func(ctx context.Context) error { a.housekeeping(ctx, w); return nil })
	goRun("eviction", w.evict.Run)
	goRun("routes", func(ctx context.Context) error {
		return peerroutes.Run(ctx, peerroutes.Config{Client: a.client, NodeName: a.cfg.NodeName,
			PodCIDR: cidr, NodeIP: w.node.Host().InternalIP, Log: a.log.With("component", "routes")})
	})
	if len(a.cfg.ClusterDNS) > 0 { // --cluster-dns: this node serves the cluster DNS (clusterdns.go)
		goRun("cluster dns", func(ctx context.Context) error { return a.runClusterDNS(ctx, w.svcFactory) })
	}
	goRun("service proxy", func(ctx context.Context) error {
		return a.runServiceProxy(ctx, w.svcFactory, cidr, w.node.Host().InternalIP)
	})
	<-ctx.Done()
	return nil
}

func nilIfDone(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// wire builds the status manager, node status, PLEG, Syncer, pod workers
// and the pod informer.
func (a *Agent) wire(ctx context.Context, c *components) (*wired, error) {
	recorder, nodeEvent := a.events(ctx)
	w := &wired{components: c, hints: make(chan struct{}, 1), evictions: podlifecycle.NewEvictions()}
	// The workers publish the pods' lifecycle on the board; the status
	// manager, made before them, reads it.
	w.board = podworkers.NewBoard()
	// The eviction manager publishes the node's pressure there; the node
	// status and admission, made before it, read it.
	w.pressure = eviction.NewNodePressure()
	var workers *podworkers.Workers // set below; the closures run later
	w.status = status.NewManager(status.ManagerConfig{Client: a.client, Log: a.log.With("component", "status"),
		PodCouldHaveRunningContainers: func(uid types.UID) bool { return !w.board.Lifecycle().Terminated(uid) },
		CachedPod:                     func(ns, name string) *corev1.Pod { return cachedPod(w, ns, name) }})
	var err error
	w.pleg, err = pleg.New(pleg.Config{List: c.rt.PodStatuses, Events: w.hints, Log: a.log.With("component", "pleg"), Metrics: a.metrics})
	if err != nil {
		return nil, fmt.Errorf("nodelet: %w", err)
	}
	w.node, err = nodestatus.New(nodestatus.Config{Client: a.client, NodeName: a.cfg.NodeName, NodeIP: a.cfg.NodeIP,
		APIServer: apiServerURL(a.cfg.RestConfig), RootDir: a.cfg.RootDir, PodCIDR: a.cfg.PodCIDR, SystemReserved: a.cfg.SystemReserved, KubeReserved: a.cfg.KubeReserved,
		MaxPods: a.cfg.MaxPods, Labels: a.cfg.NodeLabels, Taints: a.cfg.RegisterWithTaints,
		ContainerRuntimeVersion: runtimeVersion(ctx, c.rt), Event: nodeEvent, DaemonPort: int32(max(a.cfg.Port, 0)),
		Readiness: func() error { return readiness(w.pleg, c.net) }, Images: nodestatus.CachedImages(ctx, c.rt.ListImages, time.Now),
		Pressure: w.pressure.Pressure, PressureChanged: w.pressure.Changed(),
		Log: a.log.With("component", "nodestatus")})
	if err != nil {
		return nil, fmt.Errorf("nodelet: %w", err)
	}
	w.probes = prober.New(prober.Config{
		Exec:    probeExec(c.rt),
		Log:     a.log.With("component", "prober"),
		Metrics: a.metrics,
		Recorder: func(pod *corev1.Pod, container, eventtype, reason, message string) {
			recorder.Eventf(podlifecycle.PodReference(pod, podlifecycle.ContainerFieldPath(pod, container)), eventtype, reason, "%s", message)
		},
	})
	// One factory of Services and EndpointSlices serves the pods'
	// environment, the proxy and the cluster DNS: one watch of each per
	// node. Every node holds all of them, so what none of those reads
	// (managed fields, annotations) is dropped on arrival.
	w.svcFactory = informers.NewSharedInformerFactoryWithOptions(a.client, 0, informers.WithTransform(dropUnread))
	svcInformer := w.svcFactory.Core().V1().Services()
	w.svcFactory.Discovery().V1().EndpointSlices().Informer() // registered before Start
	resolv, err := a.hostResolvConf()
	if err != nil {
		return nil, err
	}
	w.services = svcInformer.Informer()
	syncer, err := podlifecycle.NewSyncer(podlifecycle.SyncerConfig{Runtime: c.rt, Network: c.net, Cgroups: c.cg, CgroupDriver: c.driver,
		Volumes: c.vols, Status: w.status, PodStatus: c.rt.PodStatus,
		Backoff:  runtime.NewBackoff(10*time.Second, 5*time.Minute, time.Now),
		Recorder: pullTimingRecorder{recorder, a.metrics.PodStart()}, Probes: w.probes,
		Services: func() ([]*corev1.Service, error) { return svcInformer.Lister().List(labels.Everything()) }, Objects: podlifecycle.APIObjects{Client: a.client},
		PauseImage: a.cfg.PodInfraImage, NodeName: a.cfg.NodeName, NodeIP: w.node.Host().InternalIP,
		ClusterDNS: a.cfg.ClusterDNS, ClusterDomain: a.cfg.ClusterDomain, HostResolvConf: resolv,
		PodFilesDir: filepath.Join(a.cfg.RootDir, "pod-files"), LogRoot: a.cfg.LogRoot, OOMScoreAdjFloor: c.floor,
		MemoryCapacity: w.node.Host().MemoryBytes, Log: a.log.With("component", "syncer"),
		PodContentRemovable: func(uid types.UID) bool { return w.board.Lifecycle().ContentRemovable(uid) }})
	if err != nil {
		return nil, err
	}
	workers = podworkers.New(podworkers.Config{Syncer: terminatingSyncer{Syncer: syncer, status: w.status, evicted: w.evictions},
		Board: w.board, Log: a.log.With("component", "podworkers")})
	w.workers = workers
	w.orphans = podlifecycle.NewOrphans(podlifecycle.OrphansConfig{
		RuntimePods: func() []*runtime.PodStatus {
			var out []*runtime.PodStatus
			for _, uid := range w.pleg.Cache().UIDs() {
				st, _ := w.pleg.Cache().Get(uid)
				out = append(out, st)
			}
			return out
		},
		CgroupPods: c.cg.ListPods, VolumePods: c.vols.ListPods,
		InAPI:     func(uid types.UID) bool { return podByUID(w, uid) != nil },
		Lifecycle: w.board.Lifecycle,
		LogRoot:   a.cfg.LogRoot, Log: a.log.With("component", "orphans"),
	})
	w.admitter = podlifecycle.NewAdmitter(podlifecycle.AdmitterConfig{
		Handler: admission.Chain{
			// First, as upstream's eviction admit handler: under pressure the
			// refusal says so whatever else would refuse the pod.
			admission.NodePressure(w.pressure.Conditions, eviction.IsCriticalPod),
			admission.ResourcesFit(func() corev1.ResourceList {
				return nodestatus.Allocatable(nodestatus.Capacity(w.node.Host(), a.maxPods()), a.cfg.SystemReserved, a.cfg.KubeReserved)
			}),
			admission.HostPorts(),
		},
		Lifecycle: w.board.Lifecycle, Pods: func() []*corev1.Pod { return informerPods(w) },
		Status: w.status, Log: a.log.With("component", "admission"),
	})
	if w.evict, err = a.evictionManager(ctx, w, recorder, nodeEvent); err != nil {
		return nil, err
	}
	if err := a.podInformer(w); err != nil {
		return nil, err
	}
	return w, nil
}

func runtimeVersion(ctx context.Context, rt *containerd.Runtime) string {
	v, err := rt.Version(ctx)
	if err != nil {
		return "containerd://unknown"
	}
	return "containerd://" + v
}

// readiness is the node's Ready condition: PLEG healthy and a CNI config.
func readiness(p *pleg.PLEG, net interface{ Ready() error }) error {
	if ok, err := p.Healthy(); !ok {
		return fmt.Errorf("PLEG is not healthy: %w", err)
	}
	if err := net.Ready(); err != nil {
		return fmt.Errorf("network not ready: %w", err)
	}
	return nil
}

// notifySystemd is the conversation with systemd (sdnotify.Notifier.Run):
// READY=1 once systemdReady passes, then watchdog pings while
// loopsHealthy does, STOPPING=1 when the agent stops.
func (a *Agent) notifySystemd(started <-chan struct{}, w *wired) func(context.Context) error {
	ready, healthy := a.systemdReady(started, w.rt), loopsHealthy(w.pleg, w.rt)
	return func(ctx context.Context) error {
		a.cfg.Notifier.Run(ctx, ready, healthy, time.Second)
		return nil
	}
}

// systemdReady is when the nodelet tells systemd it is ready (READY=1):
// start-up is through (pod CIDR, CNI config, informers synced), the Node
// object exists and containerd answers.
func (a *Agent) systemdReady(started <-chan struct{}, rt *containerd.Runtime) func(context.Context) error {
	return func(ctx context.Context) error {
		select {
		case <-started:
		default:
			return errors.New("starting: waiting for the node's pod CIDR, the CNI config and the pod informer")
		}
		if _, err := a.client.CoreV1().Nodes().Get(ctx, a.cfg.NodeName, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("get node %s: %w", a.cfg.NodeName, err)
		}
		return containerdAnswers(ctx, rt)
	}
}

// loopsHealthy feeds systemd's watchdog and /healthz: the PLEG relists (a
// stuck one means the nodelet no longer sees its containers) and
// containerd answers.
func loopsHealthy(p *pleg.PLEG, rt *containerd.Runtime) func(context.Context) error {
	return func(ctx context.Context) error {
		if ok, err := p.Healthy(); !ok {
			return fmt.Errorf("PLEG is not healthy: %w", err)
		}
		return containerdAnswers(ctx, rt)
	}
}

func containerdAnswers(ctx context.Context, rt *containerd.Runtime) error {
	if _, err := rt.Version(ctx); err != nil {
		return fmt.Errorf("containerd version: %w", err)
	}
	return nil
}

// podInformer watches the node's pods and feeds the pod workers.
func (a *Agent) podInformer(w *wired) error {
	sel := fields.OneTermEqualSelector("spec.nodeName", a.cfg.NodeName).String()
	w.factory = informers.NewSharedInformerFactoryWithOptions(a.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = sel }))
	w.pods = w.factory.Core().V1().Pods().Informer()
	err := w.pods.AddIndexers(cache.Indexers{uidIndex: func(obj any) ([]string, error) {
		if p, ok := obj.(*corev1.Pod); ok {
			return []string{string(p.UID)}, nil
		}
		return nil, nil
	}})
	if err != nil {
		return fmt.Errorf("nodelet: pod informer index: %w", err)
	}
	sync := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok {
			a.metrics.PodStart().ObservedPodOnWatch(p)
			a.syncPod(w, p)
		}
	}
	_, err = w.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    sync,
		UpdateFunc: func(_, obj any) { sync(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				a.metrics.PodStart().Forget(p.UID)
				w.admitter.Forget(p.UID)
				w.workers.Update(podworkers.UpdateOptions{Pod: p, Kind: podworkers.Remove})
			}
		},
	})
	if err != nil {
		return fmt.Errorf("nodelet: pod informer handler: %w", err)
	}
	return nil
}

// syncPod hands a pod of the API to its worker, admitting it first when
// it is new to the node. Callers are the informer's handler and
// housekeeping.
func (a *Agent) syncPod(w *wired, p *corev1.Pod) {
	if w.admitter.Admitted(p) {
		w.workers.Update(podworkers.UpdateOptions{Pod: p, Kind: podworkers.Sync})
	}
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

// cachedPod is the informer's copy of a pod (nil before the informer runs
// or when it does not have the pod). Callers must not modify it.
func cachedPod(w *wired, ns, name string) *corev1.Pod {
	if w.pods == nil {
		return nil
	}
	obj, ok, err := w.pods.GetIndexer().GetByKey(ns + "/" + name)
	if err != nil || !ok {
		return nil
	}
	p, _ := obj.(*corev1.Pod)
	return p
}

// podByUID looks a pod up in the informer's cache.
func podByUID(w *wired, uid types.UID) *corev1.Pod {
	objs, err := w.pods.GetIndexer().ByIndex(uidIndex, string(uid))
	if err != nil || len(objs) == 0 {
		return nil
	}
	p, _ := objs[0].(*corev1.Pod)
	return p
}

// forwardEvents turns containerd's task exits into PLEG relist hints,
// subscribing again (after a pause) whenever the stream ends.
func (a *Agent) forwardEvents(ctx context.Context, rt *containerd.Runtime, hints chan<- struct{}) {
	for ctx.Err() == nil {
		for range rt.Events(ctx) {
			select {
			case hints <- struct{}{}:
			default:
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// podEvents syncs the pod of every lifecycle event and of every probe
// result that changed, now rather than at the next resync. It reads the
// prober's updates until Stop closes them.
func (a *Agent) podEvents(ctx context.Context, w *wired) {
	events, probes := w.pleg.Watch(), w.probes.Updates()
	for {
		var uid types.UID
		select {
		case <-ctx.Done():
			return
		case ev := <-events:
			uid = ev.PodUID
		case u, ok := <-probes:
			if !ok {
				return
			}
			uid = u
		}
		if p := podByUID(w, uid); p != nil {
			w.workers.Update(podworkers.UpdateOptions{Pod: p, Kind: podworkers.Sync})
		}
	}
}

// housekeeping periodically syncs every pod of the API and removes pods
// the runtime, cgroups or volumes hold that the API no longer has; every
// containerGCTicks ticks it removes dead containers (containergc.go),
// every imageGCTicks unused images (imagegc.go).
func (a *Agent) housekeeping(ctx context.Context, w *wired) {
	t := time.NewTicker(housekeepingInterval)
	defer t.Stop()
	cgc := a.containerGC(w)
	igc := a.imageGC(ctx, w)
	for tick := 1; ; tick++ {
		for _, obj := range w.pods.GetStore().List() {
			if p, ok := obj.(*corev1.Pod); ok {
				a.syncPod(w, p)
			}
		}
		for _, p := range w.orphans.Pods() {
			a.log.Info("removing orphaned pod", "pod", p.Namespace+"/"+p.Name, "uid", p.UID)
			w.workers.Update(podworkers.UpdateOptions{Pod: p, Kind: podworkers.Remove})
		}
		if err := a.reconcileNetwork(ctx, w); err != nil && ctx.Err() == nil {
			a.log.Warn("reconcile pod networks", "err", err)
		}
		w.orphans.RemoveLogs()
		if tick%containerGCTicks == 0 {
			if err := cgc.Collect(ctx); err != nil && ctx.Err() == nil {
				a.log.Warn("container garbage collection", "err", err)
			}
		}
		if tick%imageGCTicks == 1 { // at start too: the first detection
			if err := igc.Collect(ctx); err != nil && ctx.Err() == nil {
				a.log.Warn("image garbage collection", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// reconcileNetwork releases the networks (netns, CNI state, IPs) of
// sandboxes containerd no longer has: leaks of a crash, a reboot or a
// sandbox removed behind the nodelet's back. The live set is read fresh
// from containerd, never from a cache that may not have listed yet.
func (a *Agent) reconcileNetwork(ctx context.Context, w *wired) error {
	pods, err := w.rt.PodStatuses(ctx)
	if err != nil {
		return err
	}
	live := map[string]bool{}
	for _, p := range pods {
		for _, sb := range p.Sandboxes {
			if sb.NetNSPath != "" {
				live[filepath.Base(sb.NetNSPath)] = true
			}
		}
	}
	return w.net.Reconcile(ctx, live)
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
