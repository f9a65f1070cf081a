package apiserver

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodelet/nodelet/controlplane/registry"
)

// admission holds the create-time checks that need state beyond the
// object itself: the namespace lifecycle and Service cluster IPs.
type admission struct {
	s     *Server
	cidr  netip.Prefix
	mu    sync.Mutex
	used  map[netip.Addr]bool
	ready bool
}

func newAdmission(s *Server, serviceCIDR string) (*admission, error) {
	p, err := netip.ParsePrefix(serviceCIDR)
	if err != nil || !p.Addr().Is4() || p.Bits() > 30 {
		return nil, fmt.Errorf("service CIDR %q: want an IPv4 prefix of /30 or larger", serviceCIDR)
	}
	return &admission{s: s, cidr: p.Masked(), used: map[netip.Addr]bool{}}, nil
}

// admitCreate runs before defaults and validation on every create.
func (a *admission) admitCreate(ctx context.Context, res *registry.Resource, obj runtime.Object) error {
	if res.Namespaced {
		if err := a.checkNamespace(ctx, res, accessor(obj).GetNamespace()); err != nil {
			return err
		}
	}
	if svc, ok := obj.(*corev1.Service); ok {
		return a.allocateClusterIP(ctx, svc)
	}
	return nil
}

// checkNamespace refuses objects in a missing or terminating namespace,
// like upstream's NamespaceLifecycle plugin.
func (a *admission) checkNamespace(ctx context.Context, res *registry.Resource, ns string) error {
	if ns == "" {
		return apierrors.NewBadRequest("the server could not find the namespace in the request")
	}
	nsRes := a.s.Resource("", "namespaces")
	if nsRes == nil {
		return nil
	}
	obj, _, err := a.s.getObject(ctx, nsRes, "", ns)
	if apierrors.IsNotFound(err) {
		return apierrors.NewNotFound(groupResource(nsRes), ns)
	}
	if err != nil {
		return err
	}
	if n, ok := obj.(*corev1.Namespace); ok && (n.DeletionTimestamp != nil || n.Status.Phase == corev1.NamespaceTerminating) {
		err := apierrors.NewForbidden(groupResource(res), "",
			fmt.Errorf("unable to create new content in namespace %s because it is being terminated", ns))
		err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
			Type: corev1.NamespaceTerminatingCause, Message: fmt.Sprintf("namespace %s is being terminated", ns), Field: "metadata.namespace"})
		return err
	}
	return nil
}

// allocateClusterIP gives a ClusterIP/NodePort/LoadBalancer Service an
// address from the service CIDR, or reserves the one it asked for. The
// table of used addresses is rebuilt from storage on first use; a single
// API server owns it (with several, allocation moves into storage).
func (a *admission) allocateClusterIP(ctx context.Context, svc *corev1.Service) error {
	if svc.Spec.Type == corev1.ServiceTypeExternalName || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.loadLocked(ctx); err != nil {
		return err
	}
	path := field.NewPath("spec", "clusterIP")
	if svc.Spec.ClusterIP != "" {
		ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
		if err != nil || !a.cidr.Contains(ip) {
			return apierrors.NewInvalid(schemaGK("", "Service"), svc.Name, field.ErrorList{field.Invalid(path, svc.Spec.ClusterIP,
				fmt.Sprintf("provided IP is not in the valid range. The range of valid IPs is %s", a.cidr))})
		}
		if a.used[ip] {
			return apierrors.NewInvalid(schemaGK("", "Service"), svc.Name, field.ErrorList{field.Invalid(path, svc.Spec.ClusterIP,
				"provided IP is already allocated")})
		}
		a.used[ip] = true
		svc.Spec.ClusterIPs = []string{ip.String()}
		return nil
	}
	ip, err := a.nextFreeLocked()
	if err != nil {
		return err
	}
	a.used[ip] = true
	svc.Spec.ClusterIP = ip.String()
	svc.Spec.ClusterIPs = []string{ip.String()}
	return nil
}

func (a *admission) loadLocked(ctx context.Context) error {
	if a.ready {
		return nil
	}
	res := a.s.Resource("", "services")
	items, _, err := a.s.listMatching(ctx, requestInfo{Resource: res}, nil)
	if err != nil {
		return fmt.Errorf("load allocated service IPs: %w", err)
	}
	for _, obj := range items {
		if ip, err := netip.ParseAddr(obj.(*corev1.Service).Spec.ClusterIP); err == nil {
			a.used[ip] = true
		}
	}
	a.ready = true
	return nil
}

// nextFreeLocked returns the lowest free address, skipping the network and
// broadcast addresses. Upstream picks at random; lowest-first keeps the
// first Service (kubernetes) on .1 as users expect.
func (a *admission) nextFreeLocked() (netip.Addr, error) {
	size := new(big.Int).Lsh(big.NewInt(1), uint(32-a.cidr.Bits())).Int64()
	base := a.cidr.Addr()
	ip := base.Next()
	for i := int64(1); i < size-1; i++ {
		if !a.used[ip] {
			return ip, nil
		}
		ip = ip.Next()
	}
	return netip.Addr{}, apierrors.NewInternalError(errors.New("no service cluster IP is free in " + a.cidr.String()))
}

// release returns what a deleted or never-stored object held.
func (a *admission) release(res *registry.Resource, obj runtime.Object) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return
	}
	ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil {
		return
	}
	a.mu.Lock()
	delete(a.used, ip)
	a.mu.Unlock()
}

// FirstServiceIP is the address of the kubernetes Service.
func FirstServiceIP(cidr string) (net.IP, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return nil, err
	}
	return net.IP(p.Masked().Addr().Next().AsSlice()), nil
}
