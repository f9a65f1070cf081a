// Package nodestatus registers the node with the API server and keeps it
// alive as upstream's kubelet does: the Node object is created (or an
// existing one reused and its default labels reconciled), its status is
// computed every StatusUpdateFrequency and written only when it changed
// or StatusReportFrequency passed, and liveness goes to a Lease in
// kube-node-lease renewed every RenewInterval.
package nodestatus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// Defaults, as upstream's kubelet.
const (
	DefaultMaxPods               = 110
	DefaultLeaseDuration         = 40 * time.Second
	DefaultRenewInterval         = 10 * time.Second
	DefaultStatusUpdateFrequency = 10 * time.Second
	DefaultStatusReportFrequency = 5 * time.Minute
	// statusUpdateRetries is upstream's nodeStatusUpdateRetry.
	statusUpdateRetries = 5
)

// Config configures a Syncer.
type Config struct {
	Client   kubernetes.Interface
	NodeName string
	// NodeIP is the InternalIP; empty: the address of the interface that
	// routes to APIServer (see RouteIPTo).
	NodeIP string
	// APIServer is the API server's URL (the kubeconfig's server).
	APIServer string
	// Hostname is the kubernetes.io/hostname label and the Hostname
	// address; empty: NodeName (several nodelets may share one host).
	Hostname string
	// Labels are extra labels set when the node is created.
	Labels map[string]string
	// Annotations the node's agent owns (the local-path directory), set
	// at registration and again on an existing Node.
	Annotations map[string]string
	// Taints are set when the node is created (--register-with-taints);
	// an existing Node keeps its own, as upstream: they are the cluster
	// admin's to change afterwards.
	Taints                       []corev1.Taint
	SystemReserved, KubeReserved corev1.ResourceList
	MaxPods                      int    // default 110
	RootDir                      string // statfs'ed for ephemeral-storage
	// PodCIDR, if set, is used instead of the control plane's assignment
	// and set on the Node when it is created.
	PodCIDR                 string
	ContainerRuntimeVersion string // e.g. "containerd://1.6.20"
	// Event, optional, records an event about the node (Starting,
	// NodeReady, NodeNotReady), as upstream's kubelet does.
	Event func(eventtype, reason, message string)
	// DaemonPort is the port of the nodelet's HTTPS API, published as
	// status.daemonEndpoints.kubeletEndpoint.port (0: none).
	DaemonPort int32
	// Readiness returns nil when the runtime, network and PLEG are healthy,
	// else why not. Nil: always ready.
	Readiness func() error
	// Pressure reports memory, disk and PID pressure. Nil: none.
	Pressure func() (mem, disk, pid bool)
	// PressureChanged, optional, receives a value when the pressure
	// changed; the status is then written at once.
	PressureChanged <-chan struct{}
	// Images lists the node's images for status.images (read once per
	// status update). Nil: none; an error keeps the last list.
	Images func() ([]corev1.ContainerImage, error)
	// VolumesInUse lists the attachable volumes mounted on the node
	// (kubernetes.io/csi/<driver>^<handle>), sorted, for
	// status.volumesInUse, read once per status update. Nil: none; an
	// error keeps the last list.
	VolumesInUse func() ([]corev1.UniqueVolumeName, error)
	Clock        clock.WithTicker // default: the real clock
	Log          *slog.Logger

	LeaseDuration         time.Duration // default 40s
	RenewInterval         time.Duration // default 10s
	StatusUpdateFrequency time.Duration // default 10s
	StatusReportFrequency time.Duration // default 5m
}

// Syncer registers the node and keeps its status and lease current.
type Syncer struct {
	cfg   Config
	host  Host
	clock clock.WithTicker
	log   *slog.Logger
	kick  chan struct{}

	nodeUID    types.UID
	lease      *coordinationv1.Lease
	lastReport time.Time

	mu        sync.Mutex
	podCIDR   string
	cidrReady chan struct{} // closed once podCIDR is known
	// addresses are the Node's status.addresses as the API server last
	// returned them.
	addresses []corev1.NodeAddress
}

// New checks cfg, fills in defaults and reads the host's facts.
func New(cfg Config) (*Syncer, error) {
	if cfg.Client == nil || cfg.NodeName == "" || cfg.RootDir == "" {
		return nil, errors.New("nodestatus: Client, NodeName and RootDir are required")
	}
	setDefaults(&cfg)
	host, err := ReadHost(cfg.RootDir)
	if err != nil {
		return nil, fmt.Errorf("nodestatus: read host facts: %w", err)
	}
	host.RuntimeVersion = cfg.ContainerRuntimeVersion
	host.Hostname = cfg.Hostname
	host.InternalIP = cfg.NodeIP
	if host.InternalIP == "" {
		ip, err := RouteIPTo(cfg.APIServer)
		if err != nil {
			return nil, fmt.Errorf("nodestatus: node IP: %w", err)
		}
		host.InternalIP = ip.String()
	}
	s := &Syncer{cfg: cfg, host: host, clock: cfg.Clock, log: cfg.Log.With("node", cfg.NodeName),
		kick: make(chan struct{}, 1), cidrReady: make(chan struct{})}
	if cfg.PodCIDR != "" {
		s.setPodCIDR(cfg.PodCIDR)
	}
	return s, nil
}

func setDefaults(cfg *Config) {
	if cfg.Hostname == "" {
		cfg.Hostname = cfg.NodeName
	}
	if cfg.MaxPods == 0 {
		cfg.MaxPods = DefaultMaxPods
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.LeaseDuration == 0 {
		cfg.LeaseDuration = DefaultLeaseDuration
	}
	if cfg.RenewInterval == 0 {
		cfg.RenewInterval = DefaultRenewInterval
	}
	if cfg.StatusUpdateFrequency == 0 {
		cfg.StatusUpdateFrequency = DefaultStatusUpdateFrequency
	}
	if cfg.StatusReportFrequency == 0 {
		cfg.StatusReportFrequency = DefaultStatusReportFrequency
	}
}

// Host returns the machine facts the node reports.
func (s *Syncer) Host() Host { return s.host }

// Addresses are the Node's status.addresses as the API server last
// returned them (none before the node is registered): what an approver of
// the node's serving certificate checks its names against.
func (s *Syncer) Addresses() []corev1.NodeAddress {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.addresses)
}

// Run registers the node (retrying until it succeeds or ctx ends), then
// renews the lease and syncs the status until ctx ends. It returns nil
// when ctx ends after registration.
func (s *Syncer) Run(ctx context.Context) error {
	// Tickers first, so a fake clock has waiters once the node is visible.
	leaseTick := s.clock.NewTicker(s.cfg.RenewInterval)
	defer leaseTick.Stop()
	statusTick := s.clock.NewTicker(s.cfg.StatusUpdateFrequency)
	defer statusTick.Stop()

	if err := s.registerWithRetry(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while registering: not a failure
		}
		return err
	}
	if s.cfg.Event != nil {
		s.cfg.Event(corev1.EventTypeNormal, "Starting", "Starting kubelet.")
	}
	go s.watchNode(ctx)
	s.syncStatus(ctx)
	s.renewLease(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-leaseTick.C():
			s.renewLease(ctx)
		case <-statusTick.C():
			s.syncStatus(ctx)
		case <-s.kick:
			s.syncStatus(ctx)
		case <-s.cfg.PressureChanged:
			s.syncStatus(ctx)
		}
	}
}

// UpdateNow asks for a status sync soon (readiness or pressure changed);
// it never blocks and requests collapse.
func (s *Syncer) UpdateNow() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// observe gathers the node's current state.
func (s *Syncer) observe() Observed {
	capacity := Capacity(s.host, s.cfg.MaxPods)
	o := Observed{
		Host: s.host, Capacity: capacity,
		Allocatable: Allocatable(capacity, s.cfg.SystemReserved, s.cfg.KubeReserved),
		Now:         metav1.NewTime(s.clock.Now()),
		DaemonPort:  s.cfg.DaemonPort,
	}
	if s.cfg.Readiness != nil {
		o.NotReady = s.cfg.Readiness()
	}
	if s.cfg.Pressure != nil {
		o.Memory, o.Disk, o.PID = s.cfg.Pressure()
	}
	if s.cfg.Images != nil {
		imgs, err := s.cfg.Images()
		if err != nil {
			s.log.Warn("list images for the node status", "err", err)
		} else {
			o.Images, o.ImagesKnown = ImageList(imgs), true
		}
	}
	if s.cfg.VolumesInUse != nil {
		vols, err := s.cfg.VolumesInUse()
		if err != nil {
			s.log.Warn("list volumes in use for the node status", "err", err)
		} else {
			o.VolumesInUse, o.VolumesInUseKnown = vols, true
		}
	}
	return o
}

// syncStatus updates the node status, retrying as upstream; failures are
// logged, the next tick tries again.
func (s *Syncer) syncStatus(ctx context.Context) {
	var err error
	for range statusUpdateRetries {
		if err = s.tryUpdateStatus(ctx); err == nil || ctx.Err() != nil {
			break
		}
	}
	if err != nil && ctx.Err() == nil {
		s.log.Error("update node status", "err", err)
	}
}

func (s *Syncer) tryUpdateStatus(ctx context.Context) error {
	node, err := s.cfg.Client.CoreV1().Nodes().Get(ctx, s.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get node %s: %w", s.cfg.NodeName, err)
	}
	s.observeNode(node)
	updated := node.DeepCopy()
	o := s.observe()
	SetStatus(updated, o, s.cfg.NodeName)
	if !StatusChanged(&node.Status, &updated.Status) && o.Now.Time.Before(s.lastReport.Add(s.cfg.StatusReportFrequency)) {
		return nil
	}
	written, err := s.cfg.Client.CoreV1().Nodes().UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("update status of node %s: %w", s.cfg.NodeName, err)
	}
	if written != nil {
		s.observeNode(written)
	}
	s.lastReport = o.Now.Time
	s.readinessEvent(readyStatus(&node.Status), readyStatus(&updated.Status))
	return nil
}

func readyStatus(st *corev1.NodeStatus) corev1.ConditionStatus {
	for _, c := range st.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

// readinessEvent records NodeReady or NodeNotReady when this nodelet's
// write changed the node's Ready condition.
func (s *Syncer) readinessEvent(before, after corev1.ConditionStatus) {
	if s.cfg.Event == nil || before == after {
		return
	}
	if after == corev1.ConditionTrue {
		s.cfg.Event(corev1.EventTypeNormal, "NodeReady", fmt.Sprintf("Node %s status is now: NodeReady", s.cfg.NodeName))
	} else {
		s.cfg.Event(corev1.EventTypeNormal, "NodeNotReady", fmt.Sprintf("Node %s status is now: NodeNotReady", s.cfg.NodeName))
	}
}

// observeNode records what the node object says: its UID, addresses and
// pod CIDR.
func (s *Syncer) observeNode(node *corev1.Node) {
	s.mu.Lock()
	if node.UID != "" {
		s.nodeUID = node.UID
	}
	s.addresses = slices.Clone(node.Status.Addresses)
	s.mu.Unlock()
	if s.cfg.PodCIDR == "" && node.Spec.PodCIDR != "" {
		s.setPodCIDR(node.Spec.PodCIDR)
	}
}

func (s *Syncer) setPodCIDR(cidr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.podCIDR == cidr {
		return
	}
	if s.podCIDR == "" {
		close(s.cidrReady)
	}
	s.podCIDR = cidr
	s.log.Info("pod CIDR", "cidr", cidr)
}

// PodCIDR returns the node's pod CIDR: the configured one, else
// spec.podCIDR as the control plane assigned it; "" while unknown.
func (s *Syncer) PodCIDR() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.podCIDR
}

// WaitPodCIDR blocks until the pod CIDR is known or ctx ends.
func (s *Syncer) WaitPodCIDR(ctx context.Context) (string, error) {
	select {
	case <-s.cidrReady:
		return s.PodCIDR(), nil
	case <-ctx.Done():
		return "", fmt.Errorf("wait for the pod CIDR of node %s: %w", s.cfg.NodeName, ctx.Err())
	}
}

func (s *Syncer) uid() types.UID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nodeUID
}
