package framework

import (
	"math"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// HostPort is a host port a container asks for; IP "0.0.0.0" means all
// addresses.
type HostPort struct {
	IP       string
	Protocol corev1.Protocol
	Port     int32
}

// Conflicts reports whether two host ports cannot coexist on a node.
func (p HostPort) Conflicts(o HostPort) bool {
	if p.Port != o.Port || p.Protocol != o.Protocol {
		return false
	}
	return p.IP == o.IP || p.IP == "0.0.0.0" || o.IP == "0.0.0.0"
}

// SpreadConstraint is a compiled topologySpreadConstraint.
type SpreadConstraint struct {
	MaxSkew           int32
	TopologyKey       string
	Hard              bool // DoNotSchedule
	Selector          labels.Selector
	MinDomains        int32
	HonorNodeAffinity bool // nodeAffinityPolicy Honor (default)
	HonorNodeTaints   bool // nodeTaintsPolicy Honor (default Ignore)
	SelfMatch         bool // the incoming pod matches Selector
}

// PodInfo is a pod with everything the scheduler derives from its spec,
// computed once when the pod is seen. It is immutable once built: the
// cache and snapshots share it between goroutines.
type PodInfo struct {
	Pod *corev1.Pod
	Key string // namespace/name
	// Requests are the pod's requests (upstream's computation); NonZero the
	// same with scoring defaults for unset cpu/memory.
	Requests Resource
	NonZero  Resource
	Ports    []HostPort
	// OwnerUID is the controller owner's UID (empty when none): pods of one
	// owner are spread across nodes.
	OwnerUID types.UID

	NodeSelector      RequiredNodeSelector
	PreferredAffinity []WeightedTerm

	RequiredAffinity     []AffinityTerm
	RequiredAntiAffinity []AffinityTerm

	SpreadConstraints []SpreadConstraint
}

// NewPodInfo builds the PodInfo of pod. pod must not be modified after.
func NewPodInfo(pod *corev1.Pod) *PodInfo {
	pi := &PodInfo{
		Pod:          pod,
		Key:          pod.Namespace + "/" + pod.Name,
		Requests:     PodRequests(&pod.Spec, false),
		NonZero:      PodRequests(&pod.Spec, true),
		NodeSelector: compileRequiredNodeSelector(&pod.Spec),
	}
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		pi.OwnerUID = ref.UID
	}
	for i := range pod.Spec.Containers {
		for _, p := range pod.Spec.Containers[i].Ports {
			if p.HostPort <= 0 {
				continue
			}
			hp := HostPort{IP: p.HostIP, Protocol: p.Protocol, Port: p.HostPort}
			if hp.IP == "" {
				hp.IP = "0.0.0.0"
			}
			if hp.Protocol == "" {
				hp.Protocol = corev1.ProtocolTCP
			}
			pi.Ports = append(pi.Ports, hp)
		}
	}
	if a := pod.Spec.Affinity; a != nil {
		pi.compileAffinity(a)
	}
	for i := range pod.Spec.TopologySpreadConstraints {
		if c, ok := compileSpreadConstraint(pod, &pod.Spec.TopologySpreadConstraints[i]); ok {
			pi.SpreadConstraints = append(pi.SpreadConstraints, c)
		}
	}
	return pi
}

func (pi *PodInfo) compileAffinity(a *corev1.Affinity) {
	ns := pi.Pod.Namespace
	if na := a.NodeAffinity; na != nil {
		for _, t := range na.PreferredDuringSchedulingIgnoredDuringExecution {
			if t.Weight == 0 {
				continue
			}
			pi.PreferredAffinity = append(pi.PreferredAffinity, WeightedTerm{Weight: t.Weight, Term: CompileNodeSelectorTerm(&t.Preference)})
		}
	}
	if pa := a.PodAffinity; pa != nil {
		for i := range pa.RequiredDuringSchedulingIgnoredDuringExecution {
			pi.RequiredAffinity = append(pi.RequiredAffinity, compileAffinityTerm(&pa.RequiredDuringSchedulingIgnoredDuringExecution[i], ns, 0))
		}
	}
	if pa := a.PodAntiAffinity; pa != nil {
		for i := range pa.RequiredDuringSchedulingIgnoredDuringExecution {
			pi.RequiredAntiAffinity = append(pi.RequiredAntiAffinity, compileAffinityTerm(&pa.RequiredDuringSchedulingIgnoredDuringExecution[i], ns, 0))
		}
	}
}

func compileSpreadConstraint(pod *corev1.Pod, c *corev1.TopologySpreadConstraint) (SpreadConstraint, bool) {
	sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
	if err != nil || c.LabelSelector == nil {
		sel = labels.Nothing()
	}
	// matchLabelKeys narrow the selector to the incoming pod's values.
	for _, k := range c.MatchLabelKeys {
		if v, ok := pod.Labels[k]; ok {
			if req, err := labels.NewRequirement(k, "=", []string{v}); err == nil {
				sel = sel.Add(*req)
			}
		}
	}
	out := SpreadConstraint{
		MaxSkew:           c.MaxSkew,
		TopologyKey:       c.TopologyKey,
		Hard:              c.WhenUnsatisfiable == corev1.DoNotSchedule,
		Selector:          sel,
		MinDomains:        1,
		HonorNodeAffinity: c.NodeAffinityPolicy == nil || *c.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor,
		HonorNodeTaints:   c.NodeTaintsPolicy != nil && *c.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor,
	}
	if c.MinDomains != nil && *c.MinDomains > 0 {
		out.MinDomains = *c.MinDomains
	}
	if out.MaxSkew <= 0 {
		out.MaxSkew = math.MaxInt32
	}
	out.SelfMatch = sel.Matches(labels.Set(pod.Labels))
	return out, true
}

// Relevant reports whether two versions of a pod differ in what the
// scheduler accounts for (so the cache must rebuild its PodInfo).
func Relevant(old, cur *corev1.Pod) bool {
	if old.Spec.NodeName != cur.Spec.NodeName || !labels.Equals(old.Labels, cur.Labels) {
		return true
	}
	return PodRequests(&old.Spec, false) != PodRequests(&cur.Spec, false)
}
