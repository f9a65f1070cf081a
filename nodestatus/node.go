package nodestatus

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Beta labels that upstream still sets next to the stable ones.
const (
	labelBetaOS   = "beta.kubernetes.io/os"
	labelBetaArch = "beta.kubernetes.io/arch"
)

// defaultLabelKeys are the labels the node owns and reconciles on an
// existing Node object, as upstream's updateDefaultLabels.
func defaultLabelKeys() []string {
	return []string{corev1.LabelHostname, corev1.LabelOSStable, corev1.LabelArchStable, labelBetaOS, labelBetaArch}
}

// Condition reasons and messages, as upstream's kubelet.
const (
	ReasonReady    = "KubeletReady"
	ReasonNotReady = "KubeletNotReady"
	messageReady   = "kubelet is posting ready status"
)

// pressureText is what a pressure condition says when false and when true.
type pressureText struct {
	falseReason, falseMessage, trueReason, trueMessage string
}

func pressureTexts(typ corev1.NodeConditionType) pressureText {
	return map[corev1.NodeConditionType]pressureText{
		corev1.NodeMemoryPressure: {"KubeletHasSufficientMemory", "kubelet has sufficient memory available",
			"KubeletHasInsufficientMemory", "kubelet has insufficient memory available"},
		corev1.NodeDiskPressure: {"KubeletHasNoDiskPressure", "kubelet has no disk pressure",
			"KubeletHasDiskPressure", "kubelet has disk pressure"},
		corev1.NodePIDPressure: {"KubeletHasSufficientPID", "kubelet has sufficient PID available",
			"KubeletHasInsufficientPID", "kubelet has insufficient PID available"},
	}[typ]
}

// Observed is the node's state at one moment, input of SetStatus.
type Observed struct {
	Host        Host
	Capacity    corev1.ResourceList
	Allocatable corev1.ResourceList
	// NotReady is nil when the node is ready, else the reason.
	NotReady error
	// Memory, disk and PID pressure.
	Memory, Disk, PID bool
	Now               metav1.Time
	// DaemonPort is where the nodelet's HTTPS API listens (0: not served).
	DaemonPort int32
	// Images is status.images when ImagesKnown (else the node keeps its
	// list).
	Images      []corev1.ContainerImage
	ImagesKnown bool
	// VolumesInUse is status.volumesInUse when VolumesInUseKnown (else
	// the node keeps its list): the attachable volumes mounted here.
	VolumesInUse      []corev1.UniqueVolumeName
	VolumesInUseKnown bool
}

// InitialNode is the Node the nodelet creates when it registers.
func InitialNode(name string, h Host, extra map[string]string, podCIDR string) *corev1.Node {
	labels := map[string]string{}
	for k, v := range extra {
		labels[k] = v
	}
	labels[corev1.LabelHostname] = hostnameLabel(h.Hostname, name)
	labels[corev1.LabelOSStable] = h.OperatingSystem
	labels[corev1.LabelArchStable] = h.Architecture
	labels[labelBetaOS] = h.OperatingSystem
	labels[labelBetaArch] = h.Architecture
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if podCIDR != "" {
		n.Spec.PodCIDR, n.Spec.PodCIDRs = podCIDR, []string{podCIDR}
	}
	return n
}

// hostnameLabel is the kubernetes.io/hostname value: the hostname
// lower-cased, as upstream, or the node name when it is unknown.
func hostnameLabel(hostname, nodeName string) string {
	if hostname == "" {
		return nodeName
	}
	return strings.ToLower(hostname)
}

// ReconcileExisting brings an existing Node's default labels (and the
// annotations initial carries, the agent's own) to those of initial, as
// upstream's tryRegisterWithAPIServer does when the node exists already;
// it reports whether existing changed. Other labels, annotations, taints
// and spec are the cluster's and stay untouched.
func ReconcileExisting(existing, initial *corev1.Node) bool {
	changed := false
	if existing.Labels == nil {
		existing.Labels = map[string]string{}
	}
	for _, k := range defaultLabelKeys() {
		want, ok := initial.Labels[k]
		if !ok {
			continue
		}
		if existing.Labels[k] != want {
			existing.Labels[k] = want
			changed = true
		}
		if existing.Labels[k] == "" {
			delete(existing.Labels, k)
		}
	}
	// The agent's own annotations follow its configuration.
	for k, v := range initial.Annotations {
		if existing.Annotations[k] != v {
			if existing.Annotations == nil {
				existing.Annotations = map[string]string{}
			}
			existing.Annotations[k] = v
			changed = true
		}
	}
	return changed
}

// SetStatus writes o into node.Status: capacity, allocatable, addresses,
// images (when known), nodeInfo and the conditions (MemoryPressure, DiskPressure, PIDPressure,
// Ready) with heartbeat o.Now and transition times kept unless the
// condition's status changed. Conditions of other owners are kept.
func SetStatus(node *corev1.Node, o Observed, nodeName string) {
	s := &node.Status
	s.Capacity = o.Capacity
	s.Allocatable = o.Allocatable
	s.Addresses = addresses(o.Host, nodeName)
	s.DaemonEndpoints.KubeletEndpoint.Port = o.DaemonPort
	if o.ImagesKnown {
		s.Images = o.Images
	}
	if o.VolumesInUseKnown {
		s.VolumesInUse = o.VolumesInUse
	}
	s.NodeInfo = corev1.NodeSystemInfo{
		MachineID: o.Host.MachineID, SystemUUID: o.Host.SystemUUID, BootID: o.Host.BootID,
		KernelVersion: o.Host.KernelVersion, OSImage: o.Host.OSImage,
		ContainerRuntimeVersion: o.Host.RuntimeVersion, KubeletVersion: KubeletVersion,
		OperatingSystem: o.Host.OperatingSystem, Architecture: o.Host.Architecture,
	}
	for _, typ := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		on := map[corev1.NodeConditionType]bool{
			corev1.NodeMemoryPressure: o.Memory, corev1.NodeDiskPressure: o.Disk, corev1.NodePIDPressure: o.PID,
		}[typ]
		setCondition(s, pressureCondition(typ, on), o.Now)
	}
	setCondition(s, readyCondition(o), o.Now)
}

func addresses(h Host, nodeName string) []corev1.NodeAddress {
	var out []corev1.NodeAddress
	if h.InternalIP != "" {
		out = append(out, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: h.InternalIP})
	}
	return append(out, corev1.NodeAddress{Type: corev1.NodeHostName, Address: hostnameLabel(h.Hostname, nodeName)})
}

func pressureCondition(typ corev1.NodeConditionType, on bool) corev1.NodeCondition {
	t := pressureTexts(typ)
	if on {
		return corev1.NodeCondition{Type: typ, Status: corev1.ConditionTrue, Reason: t.trueReason, Message: t.trueMessage}
	}
	return corev1.NodeCondition{Type: typ, Status: corev1.ConditionFalse, Reason: t.falseReason, Message: t.falseMessage}
}

// readyCondition is Ready as upstream: not ready on the readiness error or
// when cpu, memory or pods capacity is missing.
func readyCondition(o Observed) corev1.NodeCondition {
	var problems []string
	if o.NotReady != nil {
		problems = append(problems, o.NotReady.Error())
	}
	var missing []string
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
		if _, ok := o.Capacity[r]; !ok {
			missing = append(missing, string(r))
		}
	}
	if len(missing) > 0 {
		problems = append(problems, fmt.Sprintf("missing node capacity for resources: %s", strings.Join(missing, ", ")))
	}
	if len(problems) > 0 {
		return corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse,
			Reason: ReasonNotReady, Message: strings.Join(problems, ", ")}
	}
	return corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: ReasonReady, Message: messageReady}
}

// setCondition replaces or appends c with heartbeat now; the transition
// time is kept while the status stays the same.
func setCondition(s *corev1.NodeStatus, c corev1.NodeCondition, now metav1.Time) {
	c.LastHeartbeatTime = now
	c.LastTransitionTime = now
	for i := range s.Conditions {
		if s.Conditions[i].Type != c.Type {
			continue
		}
		if s.Conditions[i].Status == c.Status {
			c.LastTransitionTime = s.Conditions[i].LastTransitionTime
		}
		s.Conditions[i] = c
		return
	}
	s.Conditions = append(s.Conditions, c)
}

// StatusChanged reports whether b differs from a in anything but the
// conditions' heartbeat times, as upstream's nodeStatusHasChanged.
func StatusChanged(a, b *corev1.NodeStatus) bool {
	ac, bc := a.DeepCopy(), b.DeepCopy()
	for _, s := range []*corev1.NodeStatus{ac, bc} {
		for i := range s.Conditions {
			s.Conditions[i].LastHeartbeatTime = metav1.Time{}
		}
		slices.SortFunc(s.Conditions, func(x, y corev1.NodeCondition) int { return strings.Compare(string(x.Type), string(y.Type)) })
	}
	return !apiequality.Semantic.DeepEqual(ac, bc)
}
