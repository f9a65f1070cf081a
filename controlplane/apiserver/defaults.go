package apiserver

import (
	"context"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/controlplane/apivalidation"
	"github.com/nodelet/nodelet/controlplane/registry"
)

// systemNamespaces exist in every cluster.
var systemNamespaces = []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease}

// EnsureDefaults creates the objects every cluster has, if missing:
// the system namespaces, the kubernetes and kube-dns Services and the
// system priority classes. Serve calls it.
func (s *Server) EnsureDefaults(ctx context.Context) error {
	res := s.Resource("", "namespaces")
	if res == nil {
		return nil
	}
	for _, name := range systemNamespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		setTypeMeta(res, ns)
		if _, err := s.create(ctx, res, ns, writeOpts{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", name, err)
		}
	}
	if err := s.ensureKubernetesService(ctx); err != nil {
		return err
	}
	if err := s.ensureKubeDNSService(ctx); err != nil {
		return err
	}
	return s.ensureSystemPriorityClasses(ctx)
}

// ensureSystemPriorityClasses creates upstream's built-in priority classes
// (system-node-critical, system-cluster-critical) when missing, as
// kube-apiserver's scheduling post-start hook does; existing ones are left
// as they are.
func (s *Server) ensureSystemPriorityClasses(ctx context.Context) error {
	res := s.Resource(schedulingv1.GroupName, "priorityclasses")
	if res == nil {
		return nil
	}
	for _, pc := range apivalidation.SystemPriorityClasses() {
		setTypeMeta(res, pc)
		if _, err := s.create(ctx, res, pc, writeOpts{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create priority class %s: %w", pc.Name, err)
		}
	}
	return nil
}

// ensureKubeDNSService creates the kube-system/kube-dns Service, as
// upstream clusters have it (no selector: every nodelet serves the cluster
// DNS itself on ClusterDNSIP), which reserves the address. An existing one
// is left as it is; an address already taken is logged, not fatal.
func (s *Server) ensureKubeDNSService(ctx context.Context) error {
	res := s.Resource("", "services")
	if s.cfg.ClusterDNSIP == "" || res == nil {
		return nil
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: metav1.NamespaceSystem,
			Labels: map[string]string{"k8s-app": "kube-dns", "kubernetes.io/cluster-service": "true", "kubernetes.io/name": "KubeDNS"}},
		Spec: corev1.ServiceSpec{ClusterIP: s.cfg.ClusterDNSIP, Ports: []corev1.ServicePort{
			{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
			{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
		}},
	}
	setTypeMeta(res, svc)
	_, err := s.create(ctx, res, svc, writeOpts{})
	switch {
	case err == nil || apierrors.IsAlreadyExists(err):
		return nil
	case apierrors.IsInvalid(err):
		s.log.Warn("kube-system/kube-dns not created: its cluster IP is not available", "clusterIP", s.cfg.ClusterDNSIP, "err", err)
		return nil
	}
	return fmt.Errorf("create service kube-dns: %w", err)
}

// ensureKubernetesService creates (or corrects) the default/kubernetes
// Service with the first service IP, and its Endpoints and EndpointSlice
// pointing at the advertised address, so in-cluster clients find the API.
func (s *Server) ensureKubernetesService(ctx context.Context) error {
	if s.cfg.AdvertiseAddress == "" || s.Resource("", "services") == nil {
		return nil
	}
	port := int32(s.cfg.AdvertisePort)
	svcRes := s.Resource("", "services")
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: metav1.NamespaceDefault,
			Labels: map[string]string{"component": "apiserver", "provider": "kubernetes"}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(port)}}},
	}
	if first, err := FirstServiceIP(s.cfg.ServiceCIDR); err == nil {
		svc.Spec.ClusterIP = first.String()
	}
	setTypeMeta(svcRes, svc)
	if _, err := s.create(ctx, svcRes, svc, writeOpts{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create service kubernetes: %w", err)
	}
	if ip, err := netip.ParseAddr(s.cfg.AdvertiseAddress); err != nil || ip.IsLoopback() {
		// Endpoints may not point at loopback: pods could not use it anyway.
		s.log.Warn("not publishing endpoints for default/kubernetes: the advertise address is not reachable from pods", "address", s.cfg.AdvertiseAddress)
		return nil
	}
	if res := s.Resource("", "endpoints"); res != nil {
		ep := &corev1.Endpoints{
			ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: metav1.NamespaceDefault},
			Subsets: []corev1.EndpointSubset{{
				Addresses: []corev1.EndpointAddress{{IP: s.cfg.AdvertiseAddress}},
				Ports:     []corev1.EndpointPort{{Name: "https", Port: port, Protocol: corev1.ProtocolTCP}},
			}},
		}
		if err := s.createOrReplace(ctx, res, ep); err != nil {
			return fmt.Errorf("endpoints kubernetes: %w", err)
		}
	}
	if res := s.Resource("discovery.k8s.io", "endpointslices"); res != nil {
		ready := true
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: metav1.NamespaceDefault,
				Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes", discoveryv1.LabelManagedBy: "nodelet-apiserver"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{s.cfg.AdvertiseAddress}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: &port, Protocol: ptr.To(corev1.ProtocolTCP)}},
		}
		if err := s.createOrReplace(ctx, res, slice); err != nil {
			return fmt.Errorf("endpointslice kubernetes: %w", err)
		}
	}
	return nil
}

// createOrReplace creates obj, or replaces the stored one if it differs
// (the advertised address may have changed since the last start).
func (s *Server) createOrReplace(ctx context.Context, res *registry.Resource, obj runtime.Object) error {
	setTypeMeta(res, obj)
	m := accessor(obj)
	_, err := s.create(ctx, res, obj.DeepCopyObject(), writeOpts{})
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	_, err = s.update(ctx, res, m.GetNamespace(), m.GetName(), "", writeOpts{}, func(cur runtime.Object) (runtime.Object, error) {
		next := obj.DeepCopyObject()
		cm := accessor(cur)
		nm := accessor(next)
		nm.SetLabels(cm.GetLabels())
		nm.SetAnnotations(cm.GetAnnotations())
		nm.SetResourceVersion("")
		return next, nil
	})
	return err
}
