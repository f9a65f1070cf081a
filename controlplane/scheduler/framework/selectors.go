package framework

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/sets"
)

// NodeSelectorTerm is one compiled term of a node selector: labels must
// match Labels and the node name must satisfy Fields (metadata.name is the
// only field upstream supports). A term that failed to compile matches
// nothing, as upstream treats invalid terms.
type NodeSelectorTerm struct {
	Labels  labels.Selector
	Fields  []nodeNameRequirement
	Invalid bool
}

type nodeNameRequirement struct {
	op     corev1.NodeSelectorOperator
	values []string
}

// RequiredNodeSelector is the compiled spec.nodeSelector plus the required
// node affinity terms (ORed). The zero value matches every node.
type RequiredNodeSelector struct {
	NodeSelector labels.Selector // nil: no nodeSelector
	Terms        []NodeSelectorTerm
	HasAffinity  bool // required affinity present (then a node must match one of Terms)
}

// Match reports whether the node with the given name and labels satisfies
// the nodeSelector and the required node affinity.
func (r *RequiredNodeSelector) Match(name string, l labels.Set) bool {
	if r.NodeSelector != nil && !r.NodeSelector.Matches(l) {
		return false
	}
	if !r.HasAffinity {
		return true
	}
	for i := range r.Terms {
		if r.Terms[i].Match(name, l) {
			return true
		}
	}
	return false
}

// Match reports whether a node matches this term.
func (t *NodeSelectorTerm) Match(name string, l labels.Set) bool {
	if t.Invalid {
		return false
	}
	for _, f := range t.Fields {
		in := false
		for _, v := range f.values {
			if v == name {
				in = true
				break
			}
		}
		if in != (f.op == corev1.NodeSelectorOpIn) {
			return false
		}
	}
	return t.Labels.Matches(l)
}

// WeightedTerm is a compiled preferred node affinity term.
type WeightedTerm struct {
	Weight int32
	Term   NodeSelectorTerm
}

var nodeOps = map[corev1.NodeSelectorOperator]selection.Operator{
	corev1.NodeSelectorOpIn:           selection.In,
	corev1.NodeSelectorOpNotIn:        selection.NotIn,
	corev1.NodeSelectorOpExists:       selection.Exists,
	corev1.NodeSelectorOpDoesNotExist: selection.DoesNotExist,
	corev1.NodeSelectorOpGt:           selection.GreaterThan,
	corev1.NodeSelectorOpLt:           selection.LessThan,
}

// CompileNodeSelectorTerm compiles one term. Upstream semantics: a term
// without expressions and fields matches nothing; Gt/Lt take one integer.
func CompileNodeSelectorTerm(t *corev1.NodeSelectorTerm) NodeSelectorTerm {
	if len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0 {
		return NodeSelectorTerm{Invalid: true}
	}
	sel := labels.NewSelector()
	for _, e := range t.MatchExpressions {
		op, ok := nodeOps[e.Operator]
		if !ok {
			return NodeSelectorTerm{Invalid: true}
		}
		if op == selection.GreaterThan || op == selection.LessThan {
			if len(e.Values) != 1 {
				return NodeSelectorTerm{Invalid: true}
			}
			if _, err := strconv.ParseInt(e.Values[0], 10, 64); err != nil {
				return NodeSelectorTerm{Invalid: true}
			}
		}
		req, err := labels.NewRequirement(e.Key, op, e.Values)
		if err != nil {
			return NodeSelectorTerm{Invalid: true}
		}
		sel = sel.Add(*req)
	}
	out := NodeSelectorTerm{Labels: sel}
	for _, f := range t.MatchFields {
		if f.Key != metav1.ObjectNameField || (f.Operator != corev1.NodeSelectorOpIn && f.Operator != corev1.NodeSelectorOpNotIn) || len(f.Values) != 1 {
			return NodeSelectorTerm{Invalid: true}
		}
		out.Fields = append(out.Fields, nodeNameRequirement{op: f.Operator, values: f.Values})
	}
	return out
}

// compileRequiredNodeSelector compiles spec.nodeSelector and the required
// node affinity of a pod.
func compileRequiredNodeSelector(spec *corev1.PodSpec) RequiredNodeSelector {
	var r RequiredNodeSelector
	if len(spec.NodeSelector) > 0 {
		r.NodeSelector = labels.SelectorFromSet(spec.NodeSelector)
	}
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		r.HasAffinity = true
		for i := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			r.Terms = append(r.Terms, CompileNodeSelectorTerm(&a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[i]))
		}
	}
	return r
}

// AffinityTerm is a compiled pod (anti-)affinity term: pods in Namespaces
// (or any namespace when AllNamespaces) whose labels match Selector, within
// the topology domain TopologyKey.
type AffinityTerm struct {
	Selector      labels.Selector
	Namespaces    sets.Set[string]
	AllNamespaces bool
	TopologyKey   string
	Weight        int32 // preferred terms only
}

// Matches reports whether pod p is selected by the term.
func (t *AffinityTerm) Matches(p *PodInfo) bool {
	if !t.AllNamespaces && !t.Namespaces.Has(p.Pod.Namespace) {
		return false
	}
	return t.Selector.Matches(labels.Set(p.Pod.Labels))
}

// compileAffinityTerm compiles a pod affinity term of a pod in namespace
// ns. A nil label selector selects nothing; an empty namespaceSelector
// selects every namespace. A non-empty namespaceSelector needs namespace
// labels, which the scheduler does not watch: such a term only covers the
// namespaces listed (or the pod's own, when none are).
func compileAffinityTerm(t *corev1.PodAffinityTerm, ns string, weight int32) AffinityTerm {
	out := AffinityTerm{TopologyKey: t.TopologyKey, Weight: weight, Selector: labels.Nothing()}
	if t.LabelSelector != nil {
		if sel, err := metav1.LabelSelectorAsSelector(t.LabelSelector); err == nil {
			out.Selector = sel
		}
	}
	if ns := t.NamespaceSelector; ns != nil && len(ns.MatchLabels) == 0 && len(ns.MatchExpressions) == 0 {
		out.AllNamespaces = true
		return out
	}
	out.Namespaces = sets.New(t.Namespaces...)
	if len(t.Namespaces) == 0 {
		out.Namespaces.Insert(ns)
	}
	return out
}
