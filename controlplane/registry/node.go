package registry

import (
	"net"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const podCIDRChangeForbidden = "node updates may not change podCIDR except from \"\" to valid"

func nodeResource() *Resource {
	return &Resource{
		GroupVersion: corev1.SchemeGroupVersion,
		Name:         "nodes",
		Kind:         "Node",
		ListKind:     "NodeList",
		ShortNames:   []string{"no"},
		Verbs:        allVerbs(),
		New:          func() runtime.Object { return &corev1.Node{} },
		NewList:      func() runtime.Object { return &corev1.NodeList{} },
		// proxy reaches the node's own API through the API server.
		Subresources: []string{"status", "proxy"},

		// A node registering itself sends its status with the create, and
		// upstream keeps it, so there is no PrepareForCreate.
		Default:          mutate(defaultNode),
		PrepareForUpdate: mutate2(func(n, old *corev1.Node) { n.Status = *old.Status.DeepCopy() }),
		PrepareForStatusUpdate: mutate2(func(n, old *corev1.Node) {
			n.Spec = *old.Spec.DeepCopy()
			keepMetaForStatus(&n.ObjectMeta, &old.ObjectMeta)
			defaultNode(n)
		}),
		Validate:             validate(validateNode),
		ValidateUpdate:       validate2(validateNodeUpdate),
		ValidateStatusUpdate: validate2(validateNodeUpdate),
		Fields: selectable(func(n *corev1.Node) fields.Set {
			return fields.Set{"spec.unschedulable": fieldsBool(n.Spec.Unschedulable)}
		}),
		Columns: nodeColumns(),
		Row:     row(nodeRow),
	}
}

// defaultNode defaults allocatable to capacity and keeps podCIDR and
// podCIDRs in step, as the v1 defaults and conversion do.
func defaultNode(n *corev1.Node) {
	if n.Status.Allocatable == nil && n.Status.Capacity != nil {
		n.Status.Allocatable = n.Status.Capacity.DeepCopy()
	}
	if len(n.Spec.PodCIDRs) == 0 && n.Spec.PodCIDR != "" {
		n.Spec.PodCIDRs = []string{n.Spec.PodCIDR}
	}
	if len(n.Spec.PodCIDRs) > 0 {
		n.Spec.PodCIDR = n.Spec.PodCIDRs[0]
	}
}

// validateNode validates the spec and, where set, the status quantities. The
// taints' field path is "metadata.taints", a long-standing upstream quirk
// kept for identical error messages.
func validateNode(n *corev1.Node) field.ErrorList {
	errs := validateMeta(n, false, apivalidation.NameIsDNSSubdomain)
	errs = append(errs, validateNodeTaints(n.Spec.Taints, field.NewPath("metadata", "taints"))...)
	errs = append(errs, validateNodeResources(n)...)
	path := field.NewPath("spec", "podCIDRs")
	for i, cidr := range n.Spec.PodCIDRs {
		errs = append(errs, validation.IsValidCIDR(path.Index(i), cidr)...)
	}
	if len(errs) == 0 && len(n.Spec.PodCIDRs) > 1 {
		if len(n.Spec.PodCIDRs) > 2 || cidrIsIPv6(n.Spec.PodCIDRs[0]) == cidrIsIPv6(n.Spec.PodCIDRs[1]) {
			errs = append(errs, field.Invalid(path, n.Spec.PodCIDRs, "may specify no more than one CIDR for each IP family"))
		}
		if i, dup := firstDuplicate(n.Spec.PodCIDRs); dup {
			errs = append(errs, field.Duplicate(path.Index(i), n.Spec.PodCIDRs[i]))
		}
	}
	return errs
}

func cidrIsIPv6(cidr string) bool {
	ip, _, err := net.ParseCIDR(cidr)
	return err == nil && ip.To4() == nil
}

func validateNodeTaints(taints []corev1.Taint, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	type key struct {
		effect corev1.TaintEffect
		key    string
	}
	seen := map[key]bool{}
	for i, t := range taints {
		p := path.Index(i)
		errs = append(errs, metav1validation.ValidateLabelName(t.Key, p.Child("key"))...)
		for _, msg := range validation.IsValidLabelValue(t.Value) {
			errs = append(errs, field.Invalid(p.Child("value"), t.Value, msg))
		}
		errs = append(errs, validateTaintEffect(t.Effect, p.Child("effect"))...)
		if seen[key{t.Effect, t.Key}] {
			dup := field.Duplicate(p, t)
			dup.Detail = "taints must be unique by key and effect pair"
			errs = append(errs, dup)
			continue
		}
		seen[key{t.Effect, t.Key}] = true
	}
	return errs
}

func validateNodeResources(n *corev1.Node) field.ErrorList {
	var errs field.ErrorList
	for _, l := range []struct {
		list corev1.ResourceList
		name string
	}{{n.Status.Capacity, "capacity"}, {n.Status.Allocatable, "allocatable"}} {
		for name, q := range l.list {
			p := field.NewPath("status", l.name).Key(string(name))
			errs = append(errs, qualifiedName(string(name), p)...)
			if q.Sign() < 0 {
				errs = append(errs, field.Invalid(p, q.String(), "must be greater than or equal to 0"))
			}
		}
	}
	return errs
}

// validateNodeUpdate, for spec and status updates alike: podCIDRs and
// providerID may be set once and not changed after; addresses are unique.
func validateNodeUpdate(n, old *corev1.Node) field.ErrorList {
	errs := validateMetaUpdate(n, old)
	errs = append(errs, validateNodeResources(n)...)
	seen := map[corev1.NodeAddress]bool{}
	for i, a := range n.Status.Addresses {
		if seen[a] {
			errs = append(errs, field.Duplicate(field.NewPath("status", "addresses").Index(i), a))
		}
		seen[a] = true
	}
	if len(old.Spec.PodCIDRs) > 0 {
		if len(old.Spec.PodCIDRs) != len(n.Spec.PodCIDRs) {
			errs = append(errs, field.Forbidden(field.NewPath("spec", "podCIDRs"), podCIDRChangeForbidden))
		} else {
			for i := range old.Spec.PodCIDRs {
				if old.Spec.PodCIDRs[i] != n.Spec.PodCIDRs[i] {
					errs = append(errs, field.Forbidden(field.NewPath("spec", "podCIDRs"), podCIDRChangeForbidden))
				}
			}
		}
	}
	if old.Spec.ProviderID != "" && old.Spec.ProviderID != n.Spec.ProviderID {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "providerID"), "node updates may not change providerID except from \"\" to valid"))
	}
	if n.Spec.DoNotUseExternalID != old.Spec.DoNotUseExternalID {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "externalID"), "may not be updated"))
	}
	return append(errs, validateNodeTaints(n.Spec.Taints, field.NewPath("metadata", "taints"))...)
}

// firstDuplicate returns the index of the first repeated string in list.
func firstDuplicate(list []string) (int, bool) {
	seen := sets.New[string]()
	for i, s := range list {
		if seen.Has(s) {
			return i, true
		}
		seen.Insert(s)
	}
	return 0, false
}
