package apiserver

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodelet/nodelet/controlplane/apivalidation"
	"github.com/nodelet/nodelet/controlplane/registry"
)

// The Priority admission step, with the semantics of upstream's
// plugin/pkg/admission/priority. The plugin itself is not used: it only
// takes its PriorityClass lister from the generic admission initializers
// (an informer factory) and works on the internal pod type; here the
// classes are read from storage on each admitted create.

// podPriority is what a pod's priority class resolves to.
type podPriority struct {
	className string
	value     int32
	policy    *corev1.PreemptionPolicy
}

// defaultPriorityClass returns the globalDefault class, the one with the
// lowest value if a race left several (nil when none), as upstream.
func defaultPriorityClass(classes []*schedulingv1.PriorityClass) *schedulingv1.PriorityClass {
	var def *schedulingv1.PriorityClass
	for _, pc := range classes {
		if pc.GlobalDefault && (def == nil || pc.Value < def.Value) {
			def = pc
		}
	}
	return def
}

// resolvePriority finds what name resolves to: the named class, else the
// globalDefault class, else priority 0 with PreemptLowerPriority. An
// unknown name is refused with 403 as upstream.
func resolvePriority(name string, classes []*schedulingv1.PriorityClass) (podPriority, error) {
	if name == "" {
		if def := defaultPriorityClass(classes); def != nil {
			return podPriority{className: def.Name, value: def.Value, policy: def.PreemptionPolicy}, nil
		}
		lower := corev1.PreemptLowerPriority
		return podPriority{value: 0, policy: &lower}, nil
	}
	for _, pc := range classes {
		if pc.Name == name {
			return podPriority{className: name, value: pc.Value, policy: pc.PreemptionPolicy}, nil
		}
	}
	return podPriority{}, fmt.Errorf("no PriorityClass with name %v was found", name)
}

// admitPodPriority sets spec.priorityClassName, spec.priority and
// spec.preemptionPolicy of a new pod from its class; a pod that sets a
// priority or policy different from its class's is refused with 403.
func admitPodPriority(pod *corev1.Pod, classes []*schedulingv1.PriorityClass) error {
	forbid := func(err error) error {
		return apierrors.NewForbidden(corev1.Resource("pods"), pod.Name, err)
	}
	p, err := resolvePriority(pod.Spec.PriorityClassName, classes)
	if err != nil {
		return forbid(err)
	}
	pod.Spec.PriorityClassName = p.className
	if pod.Spec.Priority != nil && *pod.Spec.Priority != p.value {
		return forbid(fmt.Errorf("the integer value of priority (%d) must not be provided in pod spec; priority admission controller computed %d from the given PriorityClass name", *pod.Spec.Priority, p.value))
	}
	value := p.value
	pod.Spec.Priority = &value
	if p.policy != nil {
		if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy != *p.policy {
			return forbid(fmt.Errorf("the string value of PreemptionPolicy (%s) must not be provided in pod spec; priority admission controller computed %s from the given PriorityClass name", *pod.Spec.PreemptionPolicy, *p.policy))
		}
		policy := *p.policy
		pod.Spec.PreemptionPolicy = &policy
	}
	return nil
}

// admitPodPriorityUpdate keeps the priority and policy admission set on
// create when an update leaves them out (validation refuses other changes).
func admitPodPriorityUpdate(pod, old *corev1.Pod) {
	if pod.Spec.Priority == nil && old.Spec.Priority != nil {
		v := *old.Spec.Priority
		pod.Spec.Priority = &v
	}
	if pod.Spec.PreemptionPolicy == nil && old.Spec.PreemptionPolicy != nil {
		p := *old.Spec.PreemptionPolicy
		pod.Spec.PreemptionPolicy = &p
	}
}

// refuseSystemClassDelete refuses to delete upstream's system priority
// classes (system-node-critical, system-cluster-critical), as upstream's
// priorityclasses REST does.
func refuseSystemClassDelete(res *registry.Resource, name string) error {
	if res.GroupVersion.Group != schedulingv1.GroupName || res.Name != "priorityclasses" {
		return nil
	}
	for _, pc := range apivalidation.SystemPriorityClasses() {
		if pc.Name == name {
			return apierrors.NewForbidden(schedulingv1.Resource("priorityclasses"), name,
				errors.New("this is a system priority class and cannot be deleted"))
		}
	}
	return nil
}

// checkGlobalDefault refuses a second globalDefault class: on create when
// any class is default already, on update when another one is.
func checkGlobalDefault(pc *schedulingv1.PriorityClass, classes []*schedulingv1.PriorityClass, create bool) error {
	if !pc.GlobalDefault {
		return nil
	}
	def := defaultPriorityClass(classes)
	if def == nil || (!create && def.Name == pc.Name) {
		return nil
	}
	return apierrors.NewForbidden(schedulingv1.Resource("priorityclasses"), pc.Name,
		fmt.Errorf("PriorityClass %v is already marked as default. Only one default can exist", def.Name))
}

// priorityClasses reads every stored PriorityClass (none when the
// resource is not served).
func (a *ownAdmission) priorityClasses(ctx context.Context) ([]*schedulingv1.PriorityClass, error) {
	res := a.s.Resource(schedulingv1.GroupName, "priorityclasses")
	if res == nil {
		return nil, nil
	}
	items, _, err := a.s.listMatching(ctx, requestInfo{Resource: res}, nil)
	if err != nil {
		return nil, fmt.Errorf("list priority classes for admission: %w", err)
	}
	out := make([]*schedulingv1.PriorityClass, 0, len(items))
	for _, o := range items {
		if pc, ok := o.(*schedulingv1.PriorityClass); ok {
			out = append(out, pc)
		}
	}
	return out, nil
}

// admitPriority is the Priority step of the create and update paths:
// pods get their priority on create and keep it on update; a
// PriorityClass may not become a second globalDefault. Subresources are
// not admitted, as upstream.
func (a *ownAdmission) admitPriority(ctx context.Context, res *registry.Resource, obj, old runtime.Object) error {
	switch o := obj.(type) {
	case *corev1.Pod:
		if !isCorePods(res) {
			return nil
		}
		if old != nil {
			admitPodPriorityUpdate(o, old.(*corev1.Pod))
			return nil
		}
		classes, err := a.priorityClasses(ctx)
		if err != nil {
			return err
		}
		return admitPodPriority(o, classes)
	case *schedulingv1.PriorityClass:
		if !o.GlobalDefault {
			return nil
		}
		classes, err := a.priorityClasses(ctx)
		if err != nil {
			return err
		}
		return checkGlobalDefault(o, classes, old == nil)
	}
	return nil
}
